//! Shared by the `provider_*` tests: a loopback HTTP/1.1 server that replays
//! scripted replies (SSE streams written in many small pieces, error statuses,
//! dropped and held connections) and records every request; the wire-format
//! builders; the OpenAI and Anthropic configurations pointed at a server; and
//! [`Watch`], a middleware recording what the stack saw.

#![allow(dead_code)] // each test file uses its own part

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tinyagents::harness::model::providers::ProviderConfig;
use tinyagents::prelude::*;
use tinyagents::testing::CollectingSink;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// One scripted reply, for one connection.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200 text/event-stream`, the body written in these pieces, each flushed
    /// on its own, then the end of the body.
    Sse(Vec<Vec<u8>>),
    /// The pieces, then the connection closes mid-body.
    SseDrop(Vec<Vec<u8>>),
    /// The pieces, then the server waits for the client to hang up.
    SseHold(Vec<Vec<u8>>),
    /// A status with headers and a body (`application/json`; any bytes).
    Status(u16, Vec<(&'static str, String)>, Vec<u8>),
}

impl Reply {
    /// An SSE reply cut into `piece`-byte pieces (splitting lines, JSON and
    /// multi-byte characters anywhere).
    pub fn sse(body: &str, piece: usize) -> Self {
        Self::Sse(split(body, piece))
    }

    /// A JSON error reply.
    pub fn status(status: u16, headers: &[(&'static str, &str)], body: &str) -> Self {
        Self::Status(
            status,
            headers.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
            body.as_bytes().to_vec(),
        )
    }

    /// A reply whose body is these bytes exactly (invalid UTF-8 included).
    pub fn bytes(status: u16, body: &[u8]) -> Self {
        Self::Status(status, Vec::new(), body.to_vec())
    }
}

/// `body`'s bytes in pieces of `piece` bytes.
pub fn split(body: &str, piece: usize) -> Vec<Vec<u8>> {
    body.as_bytes().chunks(piece).map(<[u8]>::to_vec).collect()
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request line's target (`/v1/chat/completions`).
    pub path: String,
    /// The headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Value,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }
}

/// A loopback server answering connections with scripted replies, in order.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    hung_up: watch::Receiver<u32>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// Binds 127.0.0.1:0 and serves `replies`, one per connection; later
    /// connections get a non-retryable 418 saying the script ran out.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the loopback address");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (hung_up_tx, hung_up) = watch::channel(0u32);
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            let mut replies = replies.into_iter();
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let Some(request) = read_request(&mut socket).await else {
                    continue;
                };
                recorded.lock().unwrap().push(request);
                let reply = replies.next().unwrap_or_else(|| {
                    Reply::status(418, &[], r#"{"error":{"message":"the test scripted no more replies"}}"#)
                });
                if serve(&mut socket, reply).await {
                    hung_up_tx.send_modify(|n| *n += 1);
                }
            }
        });
        Self {
            base,
            requests,
            hung_up,
            task,
        }
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The one request so far.
    pub fn only_request(&self) -> Recorded {
        let r = self.requests();
        assert_eq!(r.len(), 1, "expected one request, got {}", r.len());
        r.into_iter().next().unwrap()
    }

    /// Waits (up to `within`) until the client has hung up on a held stream.
    pub async fn client_hung_up(&self, within: Duration) -> bool {
        let mut rx = self.hung_up.clone();
        let hung_up = tokio::time::timeout(within, rx.wait_for(|n| *n > 0)).await;
        hung_up.is_ok_and(|r| r.is_ok())
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or(Value::Null);
    Some(Recorded { path, headers, body })
}

/// Writes one reply; true when it was held and the client then hung up.
async fn serve(socket: &mut TcpStream, reply: Reply) -> bool {
    let sse_head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                    connection: close\r\ntransfer-encoding: chunked\r\n\r\n";
    match reply {
        Reply::Status(status, headers, body) => {
            let mut head = format!(
                "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(&body).await;
            let _ = socket.shutdown().await;
            false
        }
        Reply::Sse(pieces) | Reply::SseDrop(pieces) | Reply::SseHold(pieces) if pieces.is_empty() => {
            unreachable!("script at least one piece")
        }
        Reply::Sse(pieces) => {
            if write_pieces(socket, sse_head, &pieces).await {
                let _ = socket.write_all(b"0\r\n\r\n").await;
                let _ = socket.shutdown().await;
            }
            false
        }
        Reply::SseDrop(pieces) => {
            write_pieces(socket, sse_head, &pieces).await;
            // Closing here leaves the chunked body unfinished: a dropped stream.
            false
        }
        Reply::SseHold(pieces) => {
            if !write_pieces(socket, sse_head, &pieces).await {
                return true;
            }
            // Wait for the client to close its side (read returns 0 or fails).
            let mut sink = [0u8; 256];
            let wait = async {
                loop {
                    match socket.read(&mut sink).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            };
            tokio::time::timeout(Duration::from_secs(10), wait).await.is_ok()
        }
    }
}

/// Writes the head and each piece as its own chunk, pausing between them so
/// they reach the client as separate reads. False when the client went away.
async fn write_pieces(socket: &mut TcpStream, head: &str, pieces: &[Vec<u8>]) -> bool {
    if socket.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    for piece in pieces {
        let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
        chunk.extend_from_slice(piece);
        chunk.extend_from_slice(b"\r\n");
        if socket.write_all(&chunk).await.is_err() || socket.flush().await.is_err() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    true
}

/// `openai:gpt-test` at `server` (its `/v1`), with a test key.
pub fn openai(server: &Server) -> ProviderConfig {
    ProviderConfig::parse("openai:gpt-test")
        .unwrap()
        .with_base_url(server.url("/v1"))
        .with_api_key("sk-test")
}

/// `anthropic:claude-test` at `server`, with a test key.
pub fn anthropic(server: &Server) -> ProviderConfig {
    ProviderConfig::parse("anthropic:claude-test")
        .unwrap()
        .with_base_url(&server.base)
        .with_api_key("sk-ant-test")
}

/// An OpenAI Chat Completions stream: one `data:` event per chunk, then `[DONE]`.
pub fn openai_sse(chunks: &[Value]) -> String {
    let mut out = String::new();
    for c in chunks {
        out.push_str(&format!("data: {c}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

/// An OpenAI chunk carrying one `delta`.
pub fn oa_delta(delta: Value) -> Value {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}],
    })
}

/// An OpenAI chunk with the finish reason.
pub fn oa_finish(reason: &str) -> Value {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "delta": {}, "finish_reason": reason}],
    })
}

/// OpenAI's final usage chunk (`stream_options.include_usage`).
pub fn oa_usage(prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Value {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test", "choices": [],
        "usage": {
            "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        },
    })
}

/// A whole OpenAI text reply streamed word by word, with usage.
pub fn oa_text_reply(text: &str, prompt: u64, completion: u64) -> String {
    let mut chunks = vec![oa_delta(serde_json::json!({"role": "assistant", "content": ""}))];
    chunks.extend(
        text.split_inclusive(' ')
            .map(|w| oa_delta(serde_json::json!({"content": w}))),
    );
    chunks.push(oa_finish("stop"));
    chunks.push(oa_usage(prompt, completion, 0, 0));
    openai_sse(&chunks)
}

/// An Anthropic Messages stream: `event: NAME` + `data: JSON` per event.
pub fn anthropic_sse(events: &[Value]) -> String {
    let mut out = String::new();
    for e in events {
        let name = e["type"].as_str().expect("every event has a type");
        out.push_str(&format!("event: {name}\ndata: {e}\n\n"));
    }
    out
}

/// Anthropic's `message_start` with its usage.
pub fn an_start(input: u64, cache_write: u64, cache_read: u64) -> Value {
    serde_json::json!({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-test",
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input, "cache_creation_input_tokens": cache_write,
                  "cache_read_input_tokens": cache_read, "output_tokens": 1},
    }})
}

/// A whole Anthropic text reply streamed word by word, with usage.
pub fn an_text_reply(text: &str, input: u64, output: u64) -> String {
    let mut events = vec![
        an_start(input, 0, 0),
        serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ];
    events.extend(text.split_inclusive(' ').map(
        |w| serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}),
    ));
    events.push(serde_json::json!({"type": "content_block_stop", "index": 0}));
    events.push(serde_json::json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": output}}));
    events.push(serde_json::json!({"type": "message_stop"}));
    anthropic_sse(&events)
}

/// What the stack saw: every delta through `on_model_delta`, every response
/// through `after_model`, every error through `on_error`.
#[derive(Clone, Default)]
pub struct Watch {
    deltas: Arc<Mutex<Vec<ModelDelta>>>,
    responses: Arc<Mutex<Vec<ModelResponse>>>,
    errors: Arc<Mutex<Vec<TinyAgentsError>>>,
}

impl Watch {
    /// The deltas seen.
    pub fn deltas(&self) -> Vec<ModelDelta> {
        self.deltas.lock().unwrap().clone()
    }

    /// The text deltas seen, in order.
    pub fn texts(&self) -> Vec<String> {
        self.deltas()
            .iter()
            .filter_map(|d| d.as_text().map(str::to_owned))
            .collect()
    }

    /// The responses seen.
    pub fn responses(&self) -> Vec<ModelResponse> {
        self.responses.lock().unwrap().clone()
    }

    /// The errors seen.
    pub fn errors(&self) -> Vec<TinyAgentsError> {
        self.errors.lock().unwrap().clone()
    }
}

#[async_trait]
impl Middleware<()> for Watch {
    fn name(&self) -> &str {
        "Watch"
    }

    fn hooks(&self) -> HookSet {
        HookSet::ON_MODEL_DELTA | HookSet::AFTER_MODEL | HookSet::ON_ERROR
    }

    async fn on_model_delta(&self, _: &mut RunContext, _: &(), delta: &mut ModelDelta) -> Result<()> {
        self.deltas.lock().unwrap().push(delta.clone());
        Ok(())
    }

    async fn after_model(&self, _: &mut RunContext, _: &(), response: &mut ModelResponse) -> Result<()> {
        self.responses.lock().unwrap().push(response.clone());
        Ok(())
    }

    async fn on_error(&self, _: &mut RunContext, _: &(), error: &TinyAgentsError) -> Result<()> {
        self.errors.lock().unwrap().push(error.clone());
        Ok(())
    }
}

/// A run context reporting to a fresh collecting sink.
pub fn context() -> (RunContext, Arc<CollectingSink>) {
    let sink = Arc::new(CollectingSink::new());
    (
        RunContext::new(RunConfig::new("run-1"), ()).with_sink(sink.clone()),
        sink,
    )
}

/// A stack holding `watch` only: the provider's wire as it is, without the
/// default-on built-ins (whose effect on the wire has its own tests).
pub fn stack_with(watch: &Watch) -> MiddlewareStack<()> {
    MiddlewareStack::empty()
        .with(watch.clone())
        .expect("one middleware registers")
}

/// The trace lines of the model-call events only (`model_call`, `model_done`,
/// `delta`, `tool_call_delta`, `usage`, `finish`, `discarded`), for compact assertions.
pub fn model_trace(sink: &CollectingSink) -> Vec<String> {
    tinyagents::testing::trace(&sink.events())
        .into_iter()
        .filter(|l| {
            [
                "model_call",
                "model_done",
                "delta ",
                "reasoning ",
                "tool_call_delta",
                "usage",
                "finish ",
                "discarded",
                "tool_call ",
                "tool_done",
                "run_",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        })
        .collect()
}
