//! The `otlp` example's exporter against a collector of our own on loopback:
//! a tiny HTTP server decoding each `POST /v1/traces` body as the OTLP
//! protobuf `ExportTraceServiceRequest`. Checks the span names (the GenAI
//! conventions' `chat {model}`, `execute_tool {tool}`), kinds, attributes,
//! the parent links and the service name.
#![cfg(feature = "otlp")]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;
use tinyagents::middleware::TracingMiddleware;
use tinyagents::prelude::*;
use tinyagents_examples::otlp;

/// The most one request body may hold (a test collector reads nothing unbounded).
const MAX_BODY: usize = 4 << 20;

/// Serves OTLP/HTTP on 127.0.0.1:0 from a thread; every decoded request (with
/// its path and content type) is sent on the channel.
fn collector() -> (String, mpsc::Receiver<(String, String, ExportTraceServiceRequest)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                // Keep-alive: one connection may carry several requests.
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
                    let mut headers = HashMap::new();
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = h.split_once(':') {
                            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
                        }
                    }
                    let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
                    assert!(len <= MAX_BODY, "an export of {len} bytes");
                    let mut body = vec![0; len];
                    reader.read_exact(&mut body).unwrap();
                    let request = ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP protobuf body");
                    let content_type = headers.get("content-type").cloned().unwrap_or_default();
                    let _ = tx.send((path, content_type, request));
                    writer
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
                        )
                        .unwrap();
                }
            });
        }
    });
    (endpoint, rx)
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn string(attrs: &[KeyValue], key: &str) -> String {
    match attr(attrs, key) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        other => panic!("`{key}` is not a string attribute: {other:?}"),
    }
}

fn int(attrs: &[KeyValue], key: &str) -> i64 {
    match attr(attrs, key) {
        Some(AnyValue::IntValue(i)) => *i,
        Some(AnyValue::StringValue(s)) => s.parse().unwrap_or_else(|_| panic!("`{key}` = {s:?}")),
        other => panic!("`{key}` is not an integer attribute: {other:?}"),
    }
}

#[tokio::test]
async fn spans_arrive_at_an_otlp_collector_with_gen_ai_names_and_attributes() {
    let (endpoint, received) = collector();
    let provider = otlp::provider(&endpoint).unwrap();
    let subscriber = otlp::subscriber(&provider);
    let _guard = tracing::subscriber::set_default(subscriber);

    let tools = ToolRegistry::new()
        .with(tool_fn("get_weather", "The weather.", |_cx, _a| async move {
            Ok("sunny".into())
        }))
        .unwrap();
    let agent: Agent<()> = Agent::new(ScriptedModel::new(vec![
        ScriptedTurn::Reply(
            ModelResponse::tool_calls(vec![ToolCall::new("call-7", "get_weather", json!({"city": "Lyon"}))])
                .with_usage(Usage::new(30, 6)),
        ),
        ScriptedTurn::Reply(ModelResponse::text("Sunny.").with_usage(Usage::new(40, 2))),
    ]))
    .with_tools(tools)
    .with_stack(MiddlewareStack::new().with(TracingMiddleware::new()).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("otlp-run").with_model("openai:gpt-4o-mini"), ());
    agent.run(&mut ctx, &(), "Weather?").await.unwrap();
    drop(_guard);
    // Blocks until the batch is exported (and the collector has answered).
    provider.force_flush().unwrap();
    provider.shutdown().unwrap();

    let mut spans: Vec<Span> = Vec::new();
    let mut services = Vec::new();
    while let Ok((path, content_type, request)) = received.try_recv() {
        assert_eq!(path, "/v1/traces");
        assert_eq!(content_type, "application/x-protobuf");
        for rs in request.resource_spans {
            let resource = rs.resource.expect("a resource");
            services.push(string(&resource.attributes, "service.name"));
            spans.extend(rs.scope_spans.into_iter().flat_map(|s| s.spans));
        }
    }
    assert!(services.iter().all(|s| s == otlp::SERVICE_NAME), "{services:?}");
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    assert_eq!(named("invoke_agent").len(), 1, "{names:?}");
    assert_eq!(named("chat gpt-4o-mini").len(), 2, "{names:?}");
    assert_eq!(named("execute_tool get_weather").len(), 1, "{names:?}");

    let run = named("invoke_agent")[0];
    assert_eq!(string(&run.attributes, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(string(&run.attributes, "gen_ai.agent.id"), "otlp-run");
    assert_eq!(int(&run.attributes, "gen_ai.usage.input_tokens"), 70);

    let chat = named("chat gpt-4o-mini")[0];
    assert_eq!(chat.kind, SpanKind::Client as i32);
    assert_eq!(chat.parent_span_id, run.span_id, "chat spans are children of the run");
    assert_eq!(chat.trace_id, run.trace_id);
    assert_eq!(string(&chat.attributes, "gen_ai.operation.name"), "chat");
    assert_eq!(string(&chat.attributes, "gen_ai.provider.name"), "openai");
    assert_eq!(string(&chat.attributes, "gen_ai.request.model"), "gpt-4o-mini");
    let first_usage = named("chat gpt-4o-mini")
        .iter()
        .map(|s| int(&s.attributes, "gen_ai.usage.input_tokens"))
        .collect::<Vec<_>>();
    assert!(
        first_usage.contains(&30) && first_usage.contains(&40),
        "{first_usage:?}"
    );

    let tool = named("execute_tool get_weather")[0];
    assert_eq!(tool.kind, SpanKind::Internal as i32);
    assert_eq!(tool.parent_span_id, run.span_id);
    assert_eq!(string(&tool.attributes, "gen_ai.tool.name"), "get_weather");
    assert_eq!(string(&tool.attributes, "gen_ai.tool.call.id"), "call-7");
    // No content unless opted in.
    assert!(attr(&tool.attributes, "gen_ai.tool.call.arguments").is_none());
    // `otel.*` fields become the span's name and kind, not attributes.
    assert!(attr(&chat.attributes, "otel.name").is_none());
}
