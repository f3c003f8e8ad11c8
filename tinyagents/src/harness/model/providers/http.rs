//! Shared HTTP plumbing of the providers: the client, error classification
//! (status, retry hints, transport failures) and the driver that turns an SSE
//! body into a [`ModelStream`] through a provider's [`Decoder`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::stream::BoxStream;
use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};

use super::sse::{SseEvent, SseParser};
use super::ProviderConfig;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::model::{ModelDelta, ModelStream};

/// The most of an error body kept in an error message.
const MAX_ERROR_BODY: usize = 2000;

/// One provider's HTTP client: default headers (auth included), timeouts, and
/// what to name in errors.
#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    /// The model id (`provider:model`), named in every error.
    pub(crate) label: Arc<str>,
    key_env: Option<String>,
    connect_timeout: Duration,
    idle_timeout: Duration,
}

impl HttpClient {
    /// A client for `config`, sending `auth` (name, value; marked sensitive)
    /// and the configured extra headers on every call.
    pub(crate) fn new(config: &ProviderConfig, auth: Vec<(&'static str, String)>) -> Result<Self> {
        let label: Arc<str> = Arc::from(config.id());
        let mut headers = HeaderMap::new();
        let bad_header = |name: &str| {
            TinyAgentsError::config(format!(
                "model `{label}`: the HTTP header `{name}` has a name or value that cannot be sent"
            ))
        };
        for (name, value) in auth {
            let mut value = HeaderValue::from_str(&value).map_err(|_| bad_header(name))?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static(name), value);
        }
        for (name, value) in config.headers() {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad_header(name))?;
            let value = HeaderValue::from_str(value).map_err(|_| bad_header(name))?;
            headers.insert(header, value);
        }
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("tinyagents/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .connect_timeout(config.connect_timeout())
            .read_timeout(config.idle_timeout())
            .tcp_nodelay(true);
        if is_loopback(config.base_url()) {
            // A server on this machine is never reached through a proxy.
            builder = builder.no_proxy();
        }
        let client = builder
            .build()
            .map_err(|e| TinyAgentsError::config(format!("model `{label}`: cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            label,
            key_env: config.api_key_env().map(str::to_owned),
            connect_timeout: config.connect_timeout(),
            idle_timeout: config.idle_timeout(),
        })
    }

    /// POSTs a JSON body; any status but 2xx becomes a classified error.
    pub(crate) async fn post_json(&self, url: &str, body: Vec<u8>, sse: bool) -> Result<reqwest::Response> {
        let accept = if sse { "text/event-stream" } else { "application/json" };
        let response = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .body(body)
            .send()
            .await
            .map_err(|e| self.transport_error(&e, &format!("sending POST {}", shown_url(url))))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        // The body of an error is short; a failure to read it loses only detail.
        let body = response.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
        Err(self.status_error(status.as_u16(), &headers, &String::from_utf8_lossy(&body), url))
    }

    /// Reads a whole (non-streamed) body.
    pub(crate) async fn read_body(&self, response: reqwest::Response) -> Result<Vec<u8>> {
        response
            .bytes()
            .await
            .map(|b| b.to_vec())
            .map_err(|e| self.transport_error(&e, "reading the reply"))
    }

    /// A transport failure: a timeout, a refused connection, a broken body.
    /// All are retryable: nothing says the next attempt fails the same way.
    pub(crate) fn transport_error(&self, e: &reqwest::Error, doing: &str) -> TinyAgentsError {
        let label = &self.label;
        if e.is_timeout() {
            let after = if e.is_connect() {
                self.connect_timeout
            } else {
                self.idle_timeout
            };
            return TinyAgentsError::timeout(format!("model call to `{label}` ({doing})"), after);
        }
        let what = if e.is_connect() {
            "could not connect"
        } else if e.is_body() || e.is_decode() {
            "the connection broke off"
        } else {
            "the HTTP call failed"
        };
        TinyAgentsError::model(format!("`{label}`: {what} while {doing}: {}", error_chain(e)), true)
    }

    /// The classified error for a non-2xx reply to a POST to `url` (named in
    /// the message without credentials, query or fragment).
    pub(crate) fn status_error(&self, status: u16, headers: &HeaderMap, body: &str, url: &str) -> TinyAgentsError {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let hint = retry_hint(header("retry-after-ms"), header("retry-after"), SystemTime::now());
        let should_retry = match header("x-should-retry") {
            Some("true") => Some(true),
            Some("false") => Some(false),
            _ => None,
        };
        let request_id = header("x-request-id").or_else(|| header("request-id"));
        let request = format!("POST {}", shown_url(url));
        let target = Target {
            label: &self.label,
            request: Some(&request),
            key_env: self.key_env.as_deref(),
        };
        classify_status(&target, status, hint, should_retry, request_id, body)
    }
}

/// `url` as it may be shown in an error: without user info (`user:key@`),
/// query or fragment, where a key could hide.
pub(crate) fn shown_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let rest = &rest[..end];
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    }
}

/// Whether `url`'s host is this machine.
fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// An error and its sources, joined (`reqwest`'s own message is terse).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// The provider's error detail: `error.type`/`error.code` and `error.message`
/// (OpenAI, Anthropic and most compatible servers), else the raw text.
pub(crate) fn error_detail(body: &str) -> (Option<String>, String) {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    match error {
        Some(serde_json::Value::String(message)) => (None, message.clone()),
        Some(e) => {
            let code = e
                .get("code")
                .and_then(|c| c.as_str())
                .or_else(|| e.get("type").and_then(|t| t.as_str()))
                .map(str::to_owned);
            let message = e
                .get("message")
                .and_then(|m| m.as_str())
                .map_or_else(|| e.to_string(), str::to_owned);
            (code, message)
        }
        None => (None, truncate(body.trim(), MAX_ERROR_BODY).to_owned()),
    }
}

/// Who answered a non-2xx reply, and to what.
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    /// The model id (`provider:model`).
    pub(crate) label: &'a str,
    /// The request (`POST {url}`), when known.
    pub(crate) request: Option<&'a str>,
    /// The variable the key came from, named in auth failures.
    pub(crate) key_env: Option<&'a str>,
}

/// Classifies a non-2xx reply: 429 is a rate limit (retryable, hint kept)
/// unless the quota is spent; 408, 409 and 5xx (Anthropic's 529 included) are
/// retryable; 401 and 403 are auth failures naming the key variable; every
/// other 4xx is not retryable. A provider's `x-should-retry` has the last word.
pub(crate) fn classify_status(
    target: &Target<'_>,
    status: u16,
    retry_after: Option<Duration>,
    should_retry: Option<bool>,
    request_id: Option<&str>,
    body: &str,
) -> TinyAgentsError {
    let Target {
        label,
        request,
        key_env,
    } = *target;
    let (code, detail) = error_detail(body);
    let mut message = format!("`{label}` answered HTTP {status}");
    if let Some(code) = &code {
        message.push_str(&format!(" ({code})"));
    }
    if let Some(request) = request {
        message.push_str(&format!(" to {request}"));
    }
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(&detail);
    }
    if let Some(id) = request_id {
        message.push_str(&format!(" [request id {id}]"));
    }
    let quota_spent = code.as_deref() == Some("insufficient_quota");
    match status {
        401 | 403 => {
            match key_env {
                Some(var) => message.push_str(&format!("; check the API key (`{var}`)")),
                None => message.push_str("; check the API key"),
            }
            TinyAgentsError::Model {
                message,
                retryable: false,
                retry_after: None,
            }
        }
        429 if !quota_spent && should_retry != Some(false) => TinyAgentsError::RateLimited { message, retry_after },
        _ => {
            let by_status = matches!(status, 408 | 409 | 500..=599);
            TinyAgentsError::Model {
                message,
                retryable: !quota_spent && should_retry.unwrap_or(by_status),
                retry_after,
            }
        }
    }
}

/// An error event inside a stream (`{"error": {...}}` from OpenAI and
/// compatible servers, `event: error` from Anthropic): rate limits and
/// overloads are retryable, a refused request is not, and the unknown rest
/// (server errors, mostly) is.
pub(crate) fn stream_error(label: &str, data: &str) -> TinyAgentsError {
    let (code, detail) = error_detail(data);
    let code = code.unwrap_or_default();
    let message = format!("`{label}` sent an error in the stream ({code}): {detail}");
    match code.as_str() {
        "rate_limit_error" | "rate_limit_exceeded" => TinyAgentsError::RateLimited {
            message,
            retry_after: None,
        },
        "invalid_request_error"
        | "authentication_error"
        | "permission_error"
        | "not_found_error"
        | "request_too_large"
        | "billing_error"
        | "insufficient_quota" => TinyAgentsError::model(message, false),
        _ => TinyAgentsError::model(message, true),
    }
}

/// A chunk the provider sent is not what its wire format says (bad JSON, bad
/// UTF-8). Retryable: a garbled stream is a transient fault, not a verdict.
pub(crate) fn malformed(label: &str, what: impl std::fmt::Display, data: &str) -> TinyAgentsError {
    TinyAgentsError::model(
        format!(
            "`{label}` sent a malformed stream chunk ({what}): {:?}",
            truncate(data, 200)
        ),
        true,
    )
}

/// The stream ended before the provider said the reply was complete.
pub(crate) fn truncated(label: &str, missing: &str) -> TinyAgentsError {
    TinyAgentsError::model(
        format!("`{label}`: the stream ended before the reply was complete (no {missing}); the connection dropped"),
        true,
    )
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The retry hint of a reply: `retry-after-ms` (OpenAI), else `retry-after`
/// in seconds or as an HTTP date (relative to `now`).
pub(crate) fn retry_hint(ms: Option<&str>, after: Option<&str>, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = ms.and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let after = after?.trim();
    if let Ok(secs) = after.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = parse_http_date(after)?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the HTTP date format servers send.
fn parse_http_date(s: &str) -> Option<SystemTime> {
    let rest = s.split_once(", ")?.1;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u32 = day.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == month)? as u32
        + 1;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<u64> = time.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let [h, m, sec] = hms.as_slice() else { return None };
    if !(1..=31).contains(&day) || *h > 23 || *m > 59 || *sec > 60 {
        return None;
    }
    // Days from the civil date (proleptic Gregorian) to 1970-01-01.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + (*h * 3600 + *m * 60 + *sec) as i64;
    let secs = u64::try_from(secs).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

/// A provider's wire format, event by event.
pub(crate) trait Decoder: Send + 'static {
    /// Handles one event, appending the deltas it makes.
    fn event(&mut self, event: SseEvent, out: &mut VecDeque<ModelDelta>) -> Result<()>;

    /// Whether the provider said the reply is complete (`[DONE]`, `message_stop`).
    fn done(&self) -> bool;

    /// The body ended before [`done`](Self::done): append what is pending, or
    /// say the reply is incomplete.
    fn end(&mut self, out: &mut VecDeque<ModelDelta>) -> Result<()>;
}

struct Driver<D> {
    label: Arc<str>,
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    client: HttpClient,
    parser: SseParser,
    events: VecDeque<SseEvent>,
    out: VecDeque<ModelDelta>,
    error: Option<TinyAgentsError>,
    decoder: D,
    finished: bool,
}

impl<D: Decoder> Driver<D> {
    /// Reads until there is something to hand out, or the end.
    async fn fill(&mut self) {
        while self.out.is_empty() && self.error.is_none() && !self.finished {
            if self.decoder.done() {
                self.finished = true;
                // Read the body's end so the connection can be reused; a
                // server that lingers after its end marker is not waited for.
                let drain = async { while let Some(Ok(_)) = self.body.next().await {} };
                let _ = tokio::time::timeout(Duration::from_millis(250), drain).await;
                return;
            }
            match self.body.next().await {
                Some(Ok(bytes)) => {
                    if let Err(e) = self.parser.push(&bytes, &mut self.events) {
                        self.error = Some(malformed(&self.label, e, &String::from_utf8_lossy(&bytes)));
                        return;
                    }
                    while !self.decoder.done() {
                        let Some(event) = self.events.pop_front() else { break };
                        if let Err(e) = self.decoder.event(event, &mut self.out) {
                            self.error = Some(e);
                            return;
                        }
                    }
                }
                Some(Err(e)) => {
                    self.error = Some(self.client.transport_error(&e, "reading the stream"));
                    return;
                }
                None => {
                    self.finished = true;
                    if let Err(e) = self.decoder.end(&mut self.out) {
                        self.error = Some(e);
                    }
                    return;
                }
            }
        }
    }
}

/// The deltas of a streamed reply. Dropping the stream drops the HTTP body,
/// which closes the connection (cancellation ends the call on the wire too).
/// After the first error the stream ends.
pub(crate) fn sse_stream<D: Decoder>(client: HttpClient, response: reqwest::Response, decoder: D) -> ModelStream {
    let driver = Driver {
        label: client.label.clone(),
        body: response.bytes_stream().map(|r| r.map(|b| b.to_vec())).boxed(),
        client,
        parser: SseParser::new(),
        events: VecDeque::new(),
        out: VecDeque::new(),
        error: None,
        decoder,
        finished: false,
    };
    futures::stream::unfold(Some(driver), |driver| async move {
        let mut driver = driver?;
        driver.fill().await;
        if let Some(delta) = driver.out.pop_front() {
            return Some((Ok(delta), Some(driver)));
        }
        // Deltas that came before an error were handed out first.
        driver.error.take().map(|e| (Err(e), None))
    })
    .boxed()
}

/// Parses one JSON payload of a stream or a reply; bad JSON is a [`malformed`] error.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(label: &str, data: &str) -> Result<T> {
    serde_json::from_str(data).map_err(|e| malformed(label, format_args!("invalid JSON: {e}"), data))
}

/// Merges `extra` into a JSON request body (extra keys win).
pub(crate) fn merge_extra(body: &mut serde_json::Value, extra: &serde_json::Map<String, serde_json::Value>) {
    if let Some(obj) = body.as_object_mut() {
        for (k, v) in extra {
            obj.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::error::ErrorKind;

    #[test]
    fn retry_hints_in_milliseconds_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            retry_hint(Some("1500"), Some("9"), now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(retry_hint(None, Some("7"), now), Some(Duration::from_secs(7)));
        assert_eq!(retry_hint(None, Some("0.5"), now), Some(Duration::from_millis(500)));
        assert_eq!(
            retry_hint(None, Some("Sun, 06 Nov 1994 08:50:07 GMT"), now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_hint(None, Some("Sun, 06 Nov 1994 08:49:00 GMT"), now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_hint(None, Some("soon"), now), None);
        assert_eq!(retry_hint(None, None, now), None);
        assert_eq!(
            parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"),
            Some(SystemTime::UNIX_EPOCH)
        );
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2000 12:00:00 GMT"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(951_825_600))
        );
    }

    #[test]
    fn statuses_are_classified() {
        let c = |status, hint, should, body| {
            classify_status(
                &Target {
                    label: "openai:m",
                    request: None,
                    key_env: Some("OPENAI_API_KEY"),
                },
                status,
                hint,
                should,
                None,
                body,
            )
        };
        let body = r#"{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}"#;
        let e = c(429, Some(Duration::from_secs(3)), None, body);
        assert_eq!(e.kind(), ErrorKind::RateLimited);
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert!(
            e.to_string().contains("HTTP 429 (rate_limit_exceeded): slow down"),
            "{e}"
        );
        let e = c(
            429,
            None,
            None,
            r#"{"error":{"message":"pay up","code":"insufficient_quota"}}"#,
        );
        assert!(!e.is_retryable());
        for status in [408, 409, 500, 502, 503, 529] {
            assert!(c(status, None, None, "").is_retryable(), "{status}");
        }
        let e = c(
            401,
            None,
            None,
            r#"{"type":"error","error":{"type":"authentication_error","message":"bad key"}}"#,
        );
        assert!(!e.is_retryable());
        assert!(
            e.to_string()
                .contains("(authentication_error): bad key; check the API key (`OPENAI_API_KEY`)"),
            "{e}"
        );
        assert!(!c(400, None, None, "nope").is_retryable());
        assert!(!c(404, None, None, "").is_retryable());
        assert!(c(400, None, Some(true), "").is_retryable());
        assert!(!c(500, None, Some(false), "").is_retryable());
        assert_eq!(
            c(503, Some(Duration::from_secs(2)), None, "").retry_after(),
            Some(Duration::from_secs(2))
        );
    }

    #[test]
    fn loopback_hosts() {
        assert!(is_loopback("http://127.0.0.1:8080/v1"));
        assert_eq!(
            shown_url("https://user:sk-secret@api.example.com/v1/chat/completions?key=sk-2#x"),
            "https://api.example.com/v1/chat/completions"
        );
        assert_eq!(
            shown_url("http://127.0.0.1:9/v1/messages"),
            "http://127.0.0.1:9/v1/messages"
        );
        assert!(is_loopback("http://localhost:11434/v1"));
        assert!(is_loopback("http://[::1]:8000"));
        assert!(!is_loopback("https://api.openai.com/v1"));
        assert!(!is_loopback("http://10.0.0.1:8000/v1"));
    }
}
