//! `#[tool]` (issue 18, item 1): typed tools whose schema is made from the
//! parameter types, whose arguments are read back with errors naming the
//! tool, the argument and the type, unknown arguments refused by default,
//! results serialised, errors kept in class, file access declared.

use serde::{Deserialize, Serialize};
use serde_json::json;
use tinyagents::harness::tool::{FileAccess, FileAccessMode, ToolContext, ToolOutput};
use tinyagents::middleware::ParallelEditGuardMiddleware;
use tinyagents::prelude::*;
use tinyagents::testing::assert_valid_transcript;

/// Returns the weather in a city.
///
/// Use it before planning a trip.
///
/// ```
/// this example is for people and never reaches the model
/// ```
#[tool]
async fn get_weather(
    /// The city's name.
    city: String,
    /** How many days ahead (default 1). */
    days: Option<u32>,
) -> Result<String> {
    Ok(format!("{city}: sunny for {} day(s)", days.unwrap_or(1)))
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
struct Forecast {
    city: String,
    celsius: Vec<i32>,
}

/// Forecasts temperatures.
#[tool(name = "forecast", type_name = ForecastTool)]
async fn make_forecast(city: String, days: u8) -> Result<Forecast> {
    Ok(Forecast {
        city,
        celsius: (0..i32::from(days)).map(|d| 20 + d).collect(),
    })
}

/// Fails with a plain string.
#[tool]
async fn broken(reason: String) -> std::result::Result<String, String> {
    Err(format!("it broke: {reason}"))
}

/// Refuses with a classified error.
#[tool]
async fn refuse() -> Result<String> {
    Err(TinyAgentsError::validation("never on Sundays"))
}

/// Echoes with progress.
#[tool]
async fn echo(cx: &ToolContext, text: String) -> Result<ToolOutput> {
    cx.progress("echoing");
    Ok(ToolOutput::from(format!("{}:{text}", cx.call_id())))
}

/// Accepts anything.
#[tool(allow_unknown_args)]
async fn lenient(a: i64) -> String {
    a.to_string()
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SearchArgs {
    /// What to look for.
    query: String,
    limit: Option<u32>,
}

/// Searches.
#[tool]
async fn search(#[args] args: SearchArgs) -> Result<Vec<String>> {
    Ok(vec![format!("{}#{}", args.query, args.limit.unwrap_or(10))])
}

/// Writes a file.
#[tool]
async fn write_file(#[file(write)] path: String, text: String) -> Result<String> {
    Ok(format!("{} bytes to {path}", text.len()))
}

/// Copies files.
#[tool]
async fn copy_files(#[file(read)] from: Vec<String>, #[file(write)] to: Option<std::path::PathBuf>) -> String {
    format!("{} file(s) to {to:?}", from.len())
}

fn cx(call_id: &str) -> ToolContext {
    let run: RunContext = RunContext::new(RunConfig::new("r"), ());
    ToolContext::new(call_id, run.as_parent(), None)
}

async fn call(tool: &dyn Tool, args: serde_json::Value) -> Result<ToolOutput> {
    tool.call(cx("c1"), args).await
}

fn tool_error(e: &TinyAgentsError) -> String {
    assert_eq!(e.kind(), ErrorKind::Tool, "{e}");
    e.to_string()
}

#[test]
fn the_schema_comes_from_the_types_and_the_docs() {
    let schema = GetWeather.schema();
    assert_eq!(schema.name, "get_weather");
    assert_eq!(
        schema.description,
        "Returns the weather in a city.\n\nUse it before planning a trip."
    );
    let p = &schema.parameters;
    assert_eq!(p["type"], "object");
    assert_eq!(p["required"], json!(["city"]));
    assert_eq!(p["additionalProperties"], json!(false));
    assert_eq!(p["properties"]["city"]["type"], "string");
    assert_eq!(p["properties"]["city"]["description"], "The city's name.");
    assert_eq!(
        p["properties"]["days"]["description"],
        "How many days ahead (default 1)."
    );
    assert_eq!(p["properties"]["days"]["type"], json!(["integer", "null"]));
    assert_eq!(p["properties"]["days"]["minimum"], json!(0));
    assert!(
        p.get("$schema").is_none(),
        "providers refuse `$schema` in tool parameters"
    );
    // The schema is made once.
    assert!(std::ptr::eq(GetWeather.schema(), GetWeather.schema()));
}

#[test]
fn name_and_type_name_can_be_chosen() {
    assert_eq!(ForecastTool.schema().name, "forecast");
    let p = &ForecastTool.schema().parameters;
    assert_eq!(p["properties"]["days"]["maximum"], json!(255));
    assert_eq!(p["required"], json!(["city", "days"]));
}

#[tokio::test]
async fn typed_arguments_are_read_and_optional_ones_default_to_none() {
    let out = call(&GetWeather, json!({"city": "Lyon"})).await.unwrap();
    assert_eq!(out.content, "Lyon: sunny for 1 day(s)");
    let out = call(&GetWeather, json!({"city": "Oslo", "days": null})).await.unwrap();
    assert_eq!(out.content, "Oslo: sunny for 1 day(s)");
    let out = call(&GetWeather, json!({"city": "Oslo", "days": 3})).await.unwrap();
    assert_eq!(out.content, "Oslo: sunny for 3 day(s)");
    // The fn stays callable as written.
    assert_eq!(
        get_weather("Rome".into(), Some(2)).await.unwrap(),
        "Rome: sunny for 2 day(s)"
    );
}

#[tokio::test]
async fn a_missing_argument_names_the_tool_the_argument_and_the_type() {
    let e = call(&GetWeather, json!({"days": 2})).await.unwrap_err();
    let msg = tool_error(&e);
    assert!(
        msg.contains("argument `city` of tool `get_weather` is missing"),
        "{msg}"
    );
    assert!(msg.contains("`String`"), "{msg}");
}

#[tokio::test]
async fn a_wrong_type_names_the_argument_and_the_type_expected() {
    let e = call(&GetWeather, json!({"city": "Lyon", "days": "three"}))
        .await
        .unwrap_err();
    let msg = tool_error(&e);
    assert!(
        msg.contains("argument `days` of tool `get_weather` is not a valid `Option<u32>`"),
        "{msg}"
    );
    assert!(msg.contains("invalid type: string \"three\""), "{msg}");
    // Out of range is a wrong value too, not a wrap-around.
    let e = call(&ForecastTool, json!({"city": "Lyon", "days": 300}))
        .await
        .unwrap_err();
    assert!(tool_error(&e).contains("argument `days` of tool `forecast` is not a valid `u8`"));
    let e = call(&GetWeather, json!({"city": "Lyon", "days": -1}))
        .await
        .unwrap_err();
    assert!(tool_error(&e).contains("`days`"));
    // A required argument sent as null is not a value.
    let e = call(&GetWeather, json!({"city": null})).await.unwrap_err();
    assert!(tool_error(&e).contains("argument `city` of tool `get_weather` is not a valid `String`"));
}

#[tokio::test]
async fn unknown_arguments_are_refused_with_the_known_ones_listed() {
    let e = call(&GetWeather, json!({"city": "Lyon", "dayz": 2})).await.unwrap_err();
    let msg = tool_error(&e);
    assert!(msg.contains("tool `get_weather` has no argument `dayz`"), "{msg}");
    assert!(msg.contains("`city`, `days`"), "{msg}");
    assert!(msg.contains("did you mean `days`?"), "{msg}");
    // The fn never ran: nothing was half done with a misread call.
    // Opting in accepts (and ignores) them.
    let out = call(&Lenient, json!({"a": 7, "b": 8})).await.unwrap();
    assert_eq!(out.content, "7");
    assert!(Lenient.schema().parameters.get("additionalProperties").is_none());
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_refused() {
    for bad in [json!("Lyon"), json!([1]), json!(3), json!(null)] {
        let e = call(&GetWeather, bad.clone()).await.unwrap_err();
        assert!(tool_error(&e).contains("must be a JSON object"), "{bad}");
    }
    // A tool without required arguments takes a missing object as empty.
    assert_eq!(
        call(&Refuse, json!(null)).await.unwrap_err().kind(),
        ErrorKind::Validation
    );
}

#[tokio::test]
async fn a_hostile_key_is_quoted_short() {
    let key = "k".repeat(1_000_000);
    let e = call(&GetWeather, json!({ "city": "x", key.clone(): 1 }))
        .await
        .unwrap_err();
    let msg = tool_error(&e);
    assert!(msg.len() < 2_000, "the message is bounded: {} bytes", msg.len());
    let long = "x".repeat(1_000_000);
    let e = call(&ForecastTool, json!({"city": "x", "days": long}))
        .await
        .unwrap_err();
    assert!(tool_error(&e).len() < 2_000);
}

#[tokio::test]
async fn serialisable_results_go_as_json_text_and_data() {
    let out = call(&ForecastTool, json!({"city": "Lyon", "days": 2})).await.unwrap();
    let expected = json!({"city": "Lyon", "celsius": [20, 21]});
    assert_eq!(out.data, Some(expected.clone()));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out.content).unwrap(),
        expected
    );
    let out = call(&Search, json!({"query": "rust"})).await.unwrap();
    assert_eq!(out.data, Some(json!(["rust#10"])));
}

#[tokio::test]
async fn errors_keep_their_class_or_become_tool_errors() {
    let e = call(&Broken, json!({"reason": "gears"})).await.unwrap_err();
    assert_eq!(
        e,
        TinyAgentsError::Tool {
            tool: "broken".into(),
            message: "it broke: gears".into()
        }
    );
    let e = call(&Refuse, json!({})).await.unwrap_err();
    assert_eq!(e, TinyAgentsError::validation("never on Sundays"));
}

#[tokio::test]
async fn the_context_parameter_is_not_an_argument() {
    assert_eq!(Echo.schema().parameters["required"], json!(["text"]));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let run: RunContext = RunContext::new(RunConfig::new("r"), ());
    let out = Echo
        .call(ToolContext::new("c9", run.as_parent(), Some(tx)), json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(out.content, "c9:hi");
    assert_eq!(rx.recv().await.unwrap().content, "echoing");
}

#[tokio::test]
async fn an_args_struct_takes_the_whole_object_and_its_keys_are_closed() {
    let p = &Search.schema().parameters;
    assert_eq!(p["required"], json!(["query"]));
    assert_eq!(p["properties"]["query"]["description"], "What to look for.");
    assert_eq!(p["additionalProperties"], json!(false));
    let out = call(&Search, json!({"query": "q", "limit": 2})).await.unwrap();
    assert_eq!(out.data, Some(json!(["q#2"])));
    let e = call(&Search, json!({"query": "q", "limt": 2})).await.unwrap_err();
    let msg = tool_error(&e);
    assert!(
        msg.contains("has no argument `limt`") && msg.contains("did you mean `limit`?"),
        "{msg}"
    );
    let e = call(&Search, json!({"limit": 2})).await.unwrap_err();
    let msg = tool_error(&e);
    assert!(
        msg.contains("the arguments of tool `search` are not a valid `SearchArgs`") && msg.contains("query"),
        "{msg}"
    );
}

#[test]
fn file_arguments_are_declared_like_fn_tools_declare_them() {
    assert_eq!(
        WriteFile.file_access(&json!({"path": "src/a.rs", "text": "t"})),
        [FileAccess {
            path: "src/a.rs".into(),
            mode: FileAccessMode::Write
        }]
    );
    assert_eq!(
        CopyFiles.file_access(&json!({"from": ["a", "b"], "to": "c"})),
        [
            FileAccess {
                path: "a".into(),
                mode: FileAccessMode::Read
            },
            FileAccess {
                path: "b".into(),
                mode: FileAccessMode::Read
            },
            FileAccess {
                path: "c".into(),
                mode: FileAccessMode::Write
            },
        ]
    );
    assert!(GetWeather.file_access(&json!({"city": "a.rs"})).is_empty());
}

#[tokio::test]
async fn the_parallel_edit_guard_sees_typed_file_arguments() {
    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("c1", "write_file", json!({"path": "a.rs", "text": "1"})),
            ToolCall::new("c2", "write_file", json!({"path": "./a.rs", "text": "2"})),
        ]),
        ScriptedTurn::text("done"),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(WriteFile).unwrap())
        .with_stack(
            MiddlewareStack::new()
                .with(ParallelEditGuardMiddleware::deny())
                .unwrap(),
        );
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "edit")
        .await
        .unwrap();
    assert_valid_transcript(&run.messages);
    let results: Vec<_> = run.messages.iter().filter(|m| m.role == Role::Tool).collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].text(), "1 bytes to a.rs");
    assert_ne!(
        results[1].text(),
        "1 bytes to ./a.rs",
        "the second write to one file is refused"
    );
}

#[tokio::test]
async fn in_a_run_a_bad_argument_is_the_calls_error_result_and_the_model_tries_again() {
    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "get_weather", json!({"town": "Lyon"}))]),
        ScriptedTurn::tool_calls(vec![ToolCall::new("c2", "get_weather", json!({"city": "Lyon"}))]),
        ScriptedTurn::text("Sunny."),
    ]);
    let agent: Agent<()> = Agent::new(model).with_tools(ToolRegistry::new().with(GetWeather).unwrap());
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "Weather?")
        .await
        .unwrap();
    assert_valid_transcript(&run.messages);
    let results: Vec<_> = run.messages.iter().filter(|m| m.role == Role::Tool).collect();
    assert!(
        results[0].text().contains("has no argument `town`"),
        "{}",
        results[0].text()
    );
    assert_eq!(results[1].text(), "Lyon: sunny for 1 day(s)");
    assert_eq!(run.final_text(), "Sunny.");
}
