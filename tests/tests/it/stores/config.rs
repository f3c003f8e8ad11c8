//! `[store] url` in agent files: parsed and checked by `build_file` (an
//! unknown scheme, an unknown key, a URL whose feature is not compiled in
//! are located errors naming the URL and the feature; a password never
//! shows), and the shared budget over the in-process ledger.

use std::sync::Arc;
use std::time::Duration;

use tinyagents::config::{ConfigFile, MiddlewareRegistry};
use tinyagents::middleware::LimitsMiddleware;
use tinyagents::prelude::*;
use tinyagents::store::{LedgerStore, MemoryLedger, Reservation, SharedBudget, StoreUrl};

use super::support::charging_input;

fn build(text: &str) -> Result<(), String> {
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    registry
        .build_file(&ConfigFile::parse("agent.toml", text).unwrap())
        .map(drop)
        .map_err(|e| e.to_string())
}

#[test]
fn a_store_section_is_checked_where_it_is() {
    let err = build("[store]\nurl = \"mysql://db\"\nsize = 2\n").unwrap_err();
    assert!(err.contains("agent.toml:2:7: `store.url` = \"mysql://db\""), "{err}");
    assert!(err.contains("agent.toml:3:8: `store.size`"), "{err}");
    let err = build("[store]\n").unwrap_err();
    assert!(err.contains("`store.url`") && err.contains("is required"), "{err}");
    let err = build("store = 3\n").unwrap_err();
    assert!(err.contains("`store` = 3: must be a table"), "{err}");
}

#[test]
fn each_scheme_needs_its_feature_and_says_so() {
    for (url, feature, compiled) in [
        ("redis://127.0.0.1:6379", "redis", cfg!(feature = "redis")),
        ("postgres://me:pw@db/agents", "postgres", cfg!(feature = "postgres")),
        ("sqlite:state/agent.db", "sqlite", cfg!(feature = "sqlite")),
    ] {
        let text = format!("[store]\nurl = \"{url}\"\n");
        match build(&text) {
            Ok(()) => assert!(compiled, "{url} accepted without the `{feature}` feature"),
            Err(e) => {
                assert!(!compiled, "{url}: {e}");
                assert!(e.contains(&format!("needs the `{feature}` feature")), "{e}");
                assert!(!e.contains("pw@"), "the password shows: {e}");
            }
        }
    }
}

#[test]
fn urls_hide_their_password() {
    let url = StoreUrl::parse("postgres://me:hunter2@db:5432/agents");
    match url {
        Ok(url) => assert_eq!(url.to_string(), "postgres://me:***@db:5432/agents"),
        Err(e) => assert!(
            e.contains("postgres://me:***@db:5432/agents") && !e.contains("hunter2"),
            "{e}"
        ),
    }
}

/// Two "workers" (two stacks) sharing one ledger: the budget is one.
#[tokio::test]
async fn two_stacks_share_one_budget() {
    let ledger: Arc<dyn LedgerStore> = Arc::new(MemoryLedger::default());
    let worker = || {
        let budget = SharedBudget::new(ledger.clone(), "team", 0.10)
            .unwrap()
            .reserve_usd(0.03)
            .unwrap();
        let limits = charging_input(budget);
        let model = ScriptedModel::from_fn(|_| {
            tinyagents::harness::model::ModelResponse::text("ok")
                .with_usage(Usage::new(1000, 0))
                .into()
        });
        Agent::<()>::new(model).with_stack(MiddlewareStack::new().with(limits).unwrap())
    };
    let (a, b) = (worker(), worker());
    let mut outcomes = Vec::new();
    for i in 0..4 {
        let agent = if i % 2 == 0 { &a } else { &b };
        let mut ctx = RunContext::new(RunConfig::new(format!("r{i}")), ());
        outcomes.push(agent.run(&mut ctx, &(), "go").await.map(drop));
    }
    // $0.03 per call reserved and spent: 3 fit under $0.10, the 4th is refused.
    assert!(outcomes[..3].iter().all(Result::is_ok), "{outcomes:?}");
    let err = outcomes[3].as_ref().unwrap_err();
    assert!(
        matches!(err, TinyAgentsError::LimitExceeded { limit, .. } if limit == "max_price_usd"),
        "{err}"
    );
    assert!(err.to_string().contains("shared budget `team`"), "{err}");
    let t = ledger.totals("budget:team").await.unwrap();
    assert_eq!((t.spent, t.held), (90_000_000, 0));
}

#[tokio::test]
async fn a_per_thread_budget_refuses_a_run_without_a_thread() {
    let budget = SharedBudget::new(Arc::new(MemoryLedger::default()), "t", 1.0)
        .unwrap()
        .per_thread();
    let agent: Agent<()> = Agent::new(ScriptedModel::from_fn(|_| ScriptedTurn::text("ok"))).with_stack(
        MiddlewareStack::new()
            .with(LimitsMiddleware::new().shared_budget(budget))
            .unwrap(),
    );
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("has no thread id"), "{err}");
    let ok = agent
        .run(
            &mut RunContext::new(RunConfig::new("r2").with_thread("th"), ()),
            &(),
            "go",
        )
        .await;
    assert!(ok.is_ok(), "{ok:?}");
}

#[tokio::test(start_paused = true)]
async fn a_ledger_key_expires_after_its_ttl() {
    let ledger = MemoryLedger::default();
    let ttl = Duration::from_secs(60);
    assert!(matches!(
        ledger.reserve("k", 1, 1, ttl).await.unwrap(),
        Reservation::Admitted(_)
    ));
    assert!(matches!(
        ledger.reserve("k", 1, 1, ttl).await.unwrap(),
        Reservation::Refused(_)
    ));
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(ledger.totals("k").await.unwrap().held, 0, "expired");
    assert!(matches!(
        ledger.reserve("k", 1, 1, ttl).await.unwrap(),
        Reservation::Admitted(_)
    ));
}

/// Two stacks ("workers") sharing one ledger: a thread's `max_steps` is one count.
#[tokio::test]
async fn a_threads_steps_are_counted_across_stacks_sharing_a_ledger() {
    let ledger: Arc<dyn LedgerStore> = Arc::new(MemoryLedger::default());
    let worker = || {
        let noop = tinyagents::harness::tool::tool_fn("noop", "Does nothing.", |_cx, _args| async { Ok("ok".into()) });
        let model = ScriptedModel::from_fn(|request| {
            if request
                .messages
                .last()
                .is_some_and(|m| m.role == tinyagents::harness::message::Role::Tool)
            {
                ScriptedTurn::text("done")
            } else {
                ScriptedTurn::tool_call("noop", serde_json::json!({}))
            }
        });
        let limits = LimitsMiddleware::new()
            .max_steps(3)
            .shared_steps(ledger.clone(), Duration::from_secs(3600));
        Agent::<()>::new(model)
            .with_tools(ToolRegistry::new().with(noop).unwrap())
            .with_stack(MiddlewareStack::new().with(limits).unwrap())
    };
    let (a, b) = (worker(), worker());
    let mut outcomes = Vec::new();
    for i in 0..4 {
        let agent = if i % 2 == 0 { &a } else { &b };
        let mut ctx = RunContext::new(RunConfig::new(format!("r{i}")).with_thread("t"), ());
        outcomes.push(agent.run(&mut ctx, &(), "go").await.map(drop));
    }
    assert!(outcomes[..3].iter().all(Result::is_ok), "{outcomes:?}");
    let err = outcomes[3].as_ref().unwrap_err();
    assert!(
        matches!(err, TinyAgentsError::LimitExceeded { limit, .. } if limit == "max_steps"),
        "{err}"
    );
    assert!(err.to_string().contains("across every process"), "{err}");
    // Another thread has its own count.
    let mut ctx = RunContext::new(RunConfig::new("other").with_thread("u"), ());
    assert!(a.run(&mut ctx, &(), "go").await.is_ok());
}

/// An agent file's `[store]`, opened and given to the registry: two stacks
/// built from the file independently (two workers) count one thread's model
/// calls in the one SQLite ledger, so `thread_limit` holds across both.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_files_store_shares_the_thread_counts_of_the_stacks_built_from_it() {
    let db = std::env::temp_dir().join(format!("ta-store-config-{}.db", std::process::id()));
    let text = format!(
        "[store]\nurl = \"sqlite:{}\"\n\n[[middleware]]\ntype = \"model_call_limit\"\nthread_limit = 3\n\
         exit_behavior = \"error\"\n\n[[middleware]]\ntype = \"rate_limiter\"\nrate_per_second = 100.0\nburst = 100\n",
        db.display()
    );
    let file = ConfigFile::parse("agent.toml", &text).unwrap();
    let url = StoreUrl::of_section(file.section("store")).unwrap().unwrap();
    let worker = || async {
        let mut registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
        registry.set_stores(url.open().await.unwrap());
        let stack = registry.build_file(&file).unwrap();
        Agent::<()>::new(ScriptedModel::from_fn(|_| ScriptedTurn::text("ok"))).with_stack(stack)
    };
    let (a, b) = (worker().await, worker().await);
    let mut outcomes = Vec::new();
    for i in 0..5 {
        let agent = if i % 2 == 0 { &a } else { &b };
        let mut ctx = RunContext::new(RunConfig::new(format!("r{i}")).with_thread("conversation"), ());
        outcomes.push(agent.run(&mut ctx, &(), "go").await.map(drop));
    }
    assert!(outcomes[..3].iter().all(Result::is_ok), "{outcomes:?}");
    for err in outcomes[3..].iter().map(|o| o.as_ref().unwrap_err()) {
        assert!(
            matches!(err, TinyAgentsError::LimitExceeded { limit, .. } if limit == "model_call_limit"),
            "{err}"
        );
    }
    let stores = url.open().await.unwrap();
    let t = stores.ledger().totals("model_calls:conversation").await.unwrap();
    assert_eq!(t.spent + t.held, 3, "{t:?}");
    // Without the store each stack counts alone: all five runs pass.
    let plain: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    let alone = || {
        Agent::<()>::new(ScriptedModel::from_fn(|_| ScriptedTurn::text("ok")))
            .with_stack(plain.build_file(&file).unwrap())
    };
    let (a, b) = (alone(), alone());
    for i in 0..5 {
        let agent = if i % 2 == 0 { &a } else { &b };
        let mut ctx = RunContext::new(RunConfig::new(format!("p{i}")).with_thread("alone"), ());
        assert!(
            agent.run(&mut ctx, &(), "go").await.is_ok(),
            "run {i} of two unshared stacks"
        );
    }
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", db.display()));
    }
}

/// `StoreUrl` promises "Displaying a URL hides its password". libpq URLs
/// (which the postgres store accepts: "any libpq URL") may carry the
/// password as a query parameter, and a raw `/` or `#` in a userinfo
/// password ends the authority early in `redact`: both are shown in full,
/// in `check`'s output, in every store error and in config errors.
#[test]
fn a_store_url_never_shows_its_password() {
    use tinyagents::store::StoreUrl;
    let leaks: Vec<String> = [
        "postgres://db.internal/app?user=agent&password=hunter2",
        "postgresql://agent:hun/ter2@db.internal/app",
        "postgres://agent:hunter2#x@db.internal/app",
    ]
    .into_iter()
    .map(|url| match StoreUrl::parse(url) {
        Ok(parsed) => parsed.to_string(),
        Err(message) => message,
    })
    .filter(|shown| shown.contains("hunter2") || shown.contains("hun/ter2"))
    .collect();
    assert!(leaks.is_empty(), "the password shows: {leaks:#?}");
    // what is not secret stays readable: the user, the host, the database, other parameters
    // (shown by `Display`, or in the error of a build without the `postgres` feature)
    let url = "postgres://agent:pw@db.internal:5432/app?sslmode=require&password=pw";
    let shown = match StoreUrl::parse(url) {
        Ok(parsed) => parsed.to_string(),
        Err(message) => message,
    };
    assert!(
        shown.contains("postgres://agent:***@db.internal:5432/app?sslmode=require&password=***"),
        "{shown}"
    );
}
