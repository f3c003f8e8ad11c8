//! Shared HTTP plumbing of the providers: the client, error classification
//! (status, retry hints, transport failures) and the driver that turns an SSE
//! body into a [`ModelStream`] through a provider's [`Decoder`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::stream::BoxStream;
use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};

use super::sse::{SseError, SseEvent, SseParser};
use super::ProviderConfig;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::model::{ModelDelta, ModelStream};
use crate::harness::secrets::{mask_url, redactor};
use crate::harness::shorten::shorten;

/// The most characters of an error body (or of a provider's error message)
/// kept in an error message.
const MAX_ERROR_BODY: usize = 2000;

/// The most bytes of an error reply's body read; the rest is never read (the
/// connection is dropped), so a 150 MB error page costs 64 KiB.
pub(crate) const MAX_ERROR_READ: usize = 64 * 1024;

/// The largest non-streamed reply body read (a bigger one is refused unread).
pub(crate) const MAX_BODY: usize = 32 * 1024 * 1024;

/// The most bytes one streamed reply may carry, all events together.
pub(crate) const MAX_STREAM: u64 = 128 * 1024 * 1024;

/// The longest retry hint believed: a server asking for more is taken to ask
/// for this much (a hostile `retry-after: 1e20` cannot park a run for ever).
pub(crate) const MAX_RETRY_HINT: Duration = Duration::from_secs(3600);

/// The largest token count believed in a usage report (2^40, about 10^12):
/// anything above is a wire-format violation, not a count.
pub(crate) const MAX_TOKENS: u64 = 1 << 40;

/// The most tool calls one reply may hold.
pub(crate) const MAX_TOOL_CALLS: u32 = crate::harness::model::ResponseAccumulator::MAX_TOOL_CALLS;

/// One provider's HTTP client: default headers (auth included), timeouts, and
/// what to name in errors.
#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    /// Auth and configured headers, sent on every request (also through a caller's client).
    headers: HeaderMap,
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
        // The key in the auth headers was learnt by the redactor when the
        // configuration was given it; the configured headers were too.
        for (name, value) in auth {
            let mut value = HeaderValue::from_str(&value).map_err(|_| bad_header(name))?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static(name), value);
        }
        for (name, value) in config.headers() {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad_header(name))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| bad_header(name))?;
            // configured headers are mostly credentials (`api-key`): never logged
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        let client = match config.http_client() {
            Some(client) => client.clone(),
            None => {
                let mut builder = reqwest::Client::builder()
                    .user_agent(concat!("tinyagents/", env!("CARGO_PKG_VERSION")))
                    .connect_timeout(config.connect_timeout())
                    .read_timeout(config.idle_timeout())
                    // A redirect is never followed: it would re-send the key
                    // headers and the whole conversation to wherever the
                    // answer points (reqwest strips only `Authorization` and
                    // `Cookie` across hosts). A 3xx is a refused reply.
                    .redirect(reqwest::redirect::Policy::none())
                    .tcp_nodelay(true);
                if is_loopback(config.base_url()) {
                    // A server on this machine is never reached through a proxy.
                    builder = builder.no_proxy();
                }
                builder.build().map_err(|e| {
                    let e = e.without_url();
                    redacted(TinyAgentsError::config(format!(
                        "model `{label}`: cannot build the HTTP client: {}",
                        error_chain(&e)
                    )))
                })?
            }
        };
        Ok(Self {
            client,
            headers,
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
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .body(body)
            .send()
            .await
            .map_err(|e| self.transport_error(e, &format!("sending POST {}", shown_url(url))))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        // Only the head of an error body is read; a failure to read it loses only detail.
        let (body, cut) = read_limited(response, MAX_ERROR_READ).await.unwrap_or_default();
        let mut body = String::from_utf8_lossy(&body).into_owned();
        if cut {
            body.push_str(&format!(
                " … (the body was cut after {MAX_ERROR_READ} bytes, unread past that)"
            ));
        }
        Err(self.status_error(status.as_u16(), &headers, &body, url))
    }

    /// Reads a whole (non-streamed) body of at most [`MAX_BODY`] bytes; a
    /// bigger one is refused (not retryable) without being read whole.
    pub(crate) async fn read_body(&self, response: reqwest::Response) -> Result<Vec<u8>> {
        let too_big = |len: String| {
            violation(
                &self.label,
                format_args!(
                    "the reply body is {len} bytes, above the limit of {MAX_BODY} bytes for a non-streamed reply; \
                     use streaming or lower `max_tokens`"
                ),
            )
        };
        if let Some(len) = response.content_length().filter(|&n| n > MAX_BODY as u64) {
            return Err(too_big(len.to_string()));
        }
        let (body, cut) = read_limited(response, MAX_BODY)
            .await
            .map_err(|e| self.transport_error(e, "reading the reply"))?;
        if cut {
            return Err(too_big("more than that".into()));
        }
        Ok(body)
    }

    /// A transport failure: a timeout, a refused connection, a broken body.
    /// All are retryable: nothing says the next attempt fails the same way.
    /// The error is classified and kept as the source, without its URL
    /// (reqwest's own message names the URL, query and user info included);
    /// the message passes the [redactor](crate::harness::secrets::Redactor).
    pub(crate) fn transport_error(&self, e: reqwest::Error, doing: &str) -> TinyAgentsError {
        let e = e.without_url();
        let label = &self.label;
        if e.is_timeout() {
            let after = if e.is_connect() {
                self.connect_timeout
            } else {
                self.idle_timeout
            };
            return redacted(TinyAgentsError::timeout(
                format!("model call to `{label}` ({doing})"),
                after,
            ));
        }
        let what = if e.is_connect() {
            "could not connect"
        } else if e.is_body() || e.is_decode() {
            "the connection broke off"
        } else {
            "the HTTP call failed"
        };
        redacted(TinyAgentsError::model(
            format!("`{label}`: {what} while {doing}: {}", error_chain(&e)),
            true,
        ))
        .with_source(e)
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
        redacted(classify_status(&target, status, hint, should_retry, request_id, body))
    }
}

/// `error` with every known secret masked (see [`Redactor`](crate::harness::secrets::Redactor)):
/// what every error of a provider passes before it is returned.
pub(crate) fn redacted(error: TinyAgentsError) -> TinyAgentsError {
    redactor().redact_error(error)
}

/// A model's URL in its `Debug` output: [masked](mask_url).
#[allow(clippy::ptr_arg)] // the field's type, as `educe` hands it over
pub(crate) fn debug_url(url: &String, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    std::fmt::Debug::fmt(&mask_url(url), f)
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

/// Reads at most `limit` bytes of a body, chunk by chunk; `true` when more
/// was there (the rest is left unread: dropping the response closes the
/// connection).
async fn read_limited(mut response: reqwest::Response, limit: usize) -> reqwest::Result<(Vec<u8>, bool)> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// Whether `url`'s host is this machine.
fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// An error and its sources, joined (`reqwest`'s own message is terse).
/// Give it a `reqwest` error [without its URL](reqwest::Error::without_url).
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
///
/// Everything kept is [shortened](shorten): at most 2000 characters of
/// message, 64 of code, control characters escaped. Deeply nested JSON is
/// refused by the parser's depth limit and then shown as (shortened) text.
pub(crate) fn error_detail(body: &str) -> (Option<String>, String) {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    match error {
        Some(serde_json::Value::String(message)) => (None, shorten(message, MAX_ERROR_BODY)),
        Some(e) => {
            let code = e
                .get("code")
                .and_then(|c| c.as_str())
                .or_else(|| e.get("type").and_then(|t| t.as_str()))
                .map(|c| shorten(c, 64));
            let message = e.get("message").and_then(|m| m.as_str()).map_or_else(
                || shorten(&e.to_string(), MAX_ERROR_BODY),
                |m| shorten(m, MAX_ERROR_BODY),
            );
            (code, message)
        }
        None => (None, shorten(body.trim(), MAX_ERROR_BODY)),
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
        message.push_str(&format!(" [request id {}]", shorten(id, 128)));
    }
    let quota_spent = code.as_deref() == Some("insufficient_quota");
    match status {
        401 | 403 => {
            match key_env {
                Some(var) => message.push_str(&format!("; check the API key (`{var}`)")),
                None => message.push_str("; check the API key"),
            }
            TinyAgentsError::model(message, false).with_status(status)
        }
        300..=399 => {
            message.push_str(
                "; redirects are not followed (they would send the API key and the conversation elsewhere): set the \
                 model's base URL to the address the server points to",
            );
            TinyAgentsError::model(message, false).with_status(status)
        }
        429 if !quota_spent && should_retry != Some(false) => {
            TinyAgentsError::rate_limited(message, retry_after).with_status(status)
        }
        _ => {
            let by_status = matches!(status, 408 | 409 | 500..=599);
            TinyAgentsError::Model {
                message,
                retryable: !quota_spent && should_retry.unwrap_or(by_status),
                retry_after,
                status: Some(status),
                source: None,
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
        "rate_limit_error" | "rate_limit_exceeded" => TinyAgentsError::rate_limited(message, None),
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
            "`{label}` sent a malformed stream chunk ({what}): \"{}\"",
            shorten(data, 200)
        ),
        true,
    )
}

/// A whole (non-streamed) reply body as text. Invalid UTF-8 is a malformed
/// reply, as it is in a stream: never repaired into replacement characters
/// the model did not send.
pub(crate) fn body_text<'a>(label: &str, bytes: &'a [u8]) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|e| {
        let head = &bytes[..bytes.len().min(200)];
        malformed(
            label,
            format_args!("invalid UTF-8 in the reply body: {e}"),
            &String::from_utf8_lossy(head),
        )
    })
}

/// The provider sent something its wire format allows in shape but not in
/// size or range (an event past the size limit, a tool-call index out of
/// range, an absurd token count, a duplicate id). Not retryable: the reply
/// is refused, and a server that sends it once sends it again.
pub(crate) fn violation(label: &str, what: impl std::fmt::Display) -> TinyAgentsError {
    TinyAgentsError::model(
        format!("`{label}` broke the limits of its wire format: {what}; the reply is refused"),
        false,
    )
}

/// A token count from the wire, checked against [`MAX_TOKENS`].
pub(crate) fn check_tokens(label: &str, field: &str, n: Option<u64>) -> Result<Option<u64>> {
    match n {
        Some(n) if n > MAX_TOKENS => Err(violation(
            label,
            format_args!("usage field `{field}` is {n}, above the {MAX_TOKENS} tokens any reply can count"),
        )),
        n => Ok(n),
    }
}

/// A finish reason the provider names but this crate does not know, kept
/// short (it ends up in events and logs).
pub(crate) fn other_reason(reason: &str) -> crate::harness::model::FinishReason {
    crate::harness::model::FinishReason::Other(shorten(reason, 64))
}

/// The stream ended before the provider said the reply was complete.
pub(crate) fn truncated(label: &str, missing: &str) -> TinyAgentsError {
    TinyAgentsError::model(
        format!("`{label}`: the stream ended before the reply was complete (no {missing}); the connection dropped"),
        true,
    )
}

/// Seconds from the wire as a duration: a negative, NaN or infinite value is
/// no hint; anything above [`MAX_RETRY_HINT`] is clamped to it (checked
/// conversion: `1e300` never panics).
fn hint_secs(secs: f64) -> Option<Duration> {
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    Some(
        Duration::try_from_secs_f64(secs)
            .unwrap_or(MAX_RETRY_HINT)
            .min(MAX_RETRY_HINT),
    )
}

/// The retry hint of a reply: `retry-after-ms` (OpenAI), else `retry-after`
/// in seconds or as an HTTP date (relative to `now`); never more than
/// [`MAX_RETRY_HINT`].
pub(crate) fn retry_hint(ms: Option<&str>, after: Option<&str>, now: SystemTime) -> Option<Duration> {
    if let Some(hint) = ms
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(|ms| hint_secs(ms / 1000.0))
    {
        return Some(hint);
    }
    let after = after?.trim();
    if let Ok(secs) = after.parse::<f64>() {
        return hint_secs(secs);
    }
    let at = parse_http_date(after)?;
    Some(at.duration_since(now).unwrap_or_default().min(MAX_RETRY_HINT))
}

/// Parses an HTTP date in any of the three forms RFC 9110 says a recipient
/// accepts: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete
/// RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`), with the `httpdate` crate.
fn parse_http_date(s: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(s).ok()
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
    /// Bytes read from the body so far, and the most allowed.
    read: u64,
    max_read: u64,
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
                    self.read = self.read.saturating_add(bytes.len() as u64);
                    if self.read > self.max_read {
                        self.error = Some(violation(
                            &self.label,
                            format_args!(
                                "the stream carried more than {} bytes, the limit for one reply",
                                self.max_read
                            ),
                        ));
                        return;
                    }
                    if let Err(e) = self.parser.push(&bytes, &mut self.events) {
                        self.error = Some(match e {
                            SseError::TooLarge(_) => violation(&self.label, e),
                            SseError::Utf8 => {
                                let head = &bytes[..bytes.len().min(400)];
                                malformed(&self.label, e, &String::from_utf8_lossy(head))
                            }
                        });
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
                    self.error = Some(self.client.transport_error(e, "reading the stream"));
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
    let body = response.bytes_stream().map(|r| r.map(|b| b.to_vec())).boxed();
    drive(client, body, decoder, MAX_STREAM)
}

/// The delta stream of an SSE `body`, refusing more than `max_read` bytes.
pub(crate) fn drive<D: Decoder>(
    client: HttpClient,
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    decoder: D,
    max_read: u64,
) -> ModelStream {
    let driver = Driver {
        label: client.label.clone(),
        body,
        client,
        parser: SseParser::new(),
        events: VecDeque::new(),
        out: VecDeque::new(),
        error: None,
        decoder,
        finished: false,
        read: 0,
        max_read,
    };
    futures::stream::unfold(Some(driver), |driver| async move {
        let mut driver = driver?;
        driver.fill().await;
        if let Some(delta) = driver.out.pop_front() {
            return Some((Ok(delta), Some(driver)));
        }
        // Deltas that came before an error were handed out first.
        driver.error.take().map(|e| (Err(redacted(e)), None))
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
    fn retry_after_dates_in_all_three_http_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        for form in [
            "Sun, 06 Nov 1994 08:50:07 GMT",  // IMF-fixdate
            "Sunday, 06-Nov-94 08:50:07 GMT", // obsolete RFC 850
            "Sun Nov  6 08:50:07 1994",       // asctime
        ] {
            assert_eq!(
                retry_hint(None, Some(form), now),
                Some(Duration::from_secs(30)),
                "{form}"
            );
        }
        // A date far ahead is clamped to the longest hint; malformed dates are no hint.
        assert_eq!(
            retry_hint(None, Some("Fri, 31 Dec 9999 23:59:59 GMT"), now),
            Some(MAX_RETRY_HINT)
        );
        for bad in [
            "Sun, 06 Nov 1994 25:00:00 GMT",
            "Sun, 32 Nov 1994 08:00:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "06 Nov 1994",
            "Sun, 06 Nov 1994 08:49:37 GMT trailing",
            "",
        ] {
            assert_eq!(retry_hint(None, Some(bad), now), None, "{bad:?}");
        }
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
        assert!(is_loopback("http://user:pw@127.0.0.1:9/v1?api-key=k"));
        assert!(!is_loopback("https://api.openai.com/v1"));
        assert!(!is_loopback("http://10.0.0.1:8000/v1"));
    }
}
