//! A store URL's secrets never show: the password of its user info and its
//! secret query values are masked in the URL's `Display` and `Debug`, and
//! in every error of opening it, whatever the Redis or PostgreSQL client
//! says (a refused connection, a URL the client cannot parse). Loopback
//! ports nothing listens on; no server needed.
#![cfg(any(feature = "redis", feature = "postgres"))]

use tinyagents::store::StoreUrl;

const PASSWORD: &str = "pw-store-Jh5Kl8Mn2Qr4St7Uv";
const QUERY_PASSWORD: &str = "qp-store-Ab3Cd6Ef9Gh2Ij5Kl8Mn";

fn assert_clean(what: &str, text: &str) {
    for secret in [PASSWORD, QUERY_PASSWORD] {
        for piece in secret.as_bytes().windows(12) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(!text.contains(piece), "{what} shows `{piece}` of a secret:\n{text}");
        }
    }
}

fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

async fn open_fails(url: &str) {
    let parsed = StoreUrl::parse(url).unwrap_or_else(|e| panic!("{e}"));
    assert_clean(url, &format!("{parsed} {parsed:?}"));
    assert!(parsed.to_string().contains(":***@"), "{parsed}");
    let err = parsed.open().await.expect_err("nothing listens there");
    assert_clean(url, &format!("{err} {err:?}"));
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn a_redis_url_shows_no_secret_in_its_errors() {
    let port = closed_port();
    open_fails(&format!("redis://user:{PASSWORD}@127.0.0.1:{port}/0")).await;
    // A URL the client refuses to parse: its message passes the redactor too.
    let bad = format!("redis://user:{PASSWORD}@127.0.0.1:{port}/not-a-db");
    let err = StoreUrl::parse(&bad)
        .unwrap()
        .open()
        .await
        .expect_err("not a database number");
    assert_clean(&bad, &format!("{err} {err:?}"));
    assert!(err.to_string().contains("user:***@127.0.0.1"), "{err}");
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn a_postgres_url_shows_no_secret_in_its_errors() {
    let port = closed_port();
    open_fails(&format!(
        "postgres://app:{PASSWORD}@127.0.0.1:{port}/db?password={QUERY_PASSWORD}&connect_timeout=2"
    ))
    .await;
    let bad = format!("postgres://app:{PASSWORD}@127.0.0.1:{port}/db?password={QUERY_PASSWORD}&sslmode=sometimes");
    let err = StoreUrl::parse(&bad)
        .unwrap()
        .open()
        .await
        .expect_err("not an ssl mode");
    assert_clean(&bad, &format!("{err} {err:?}"));
}
