//! [`StructuredOutputMiddleware`]: validates the final reply against a JSON Schema,
//! asks again with the errors up to a bound, and puts the value in
//! [`AgentRun::structured_output`].

use std::sync::Mutex;

use serde_json::Value;

use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::message::{Message, MessageId};
use crate::harness::middleware::ModelHandler;
use crate::harness::model::{ModelRequest, ModelResponse, PromptSegment, ResponseFormat, SegmentStability};
use crate::harness::run::AgentRun;
use tinyagents_macros::{middleware, MiddlewareConfig};

/// The id of the system prompt segment holding the schema.
pub const STRUCTURED_OUTPUT_SEGMENT: &str = "structured_output";

/// Options of [`StructuredOutputMiddleware`] (`type = "structured_output"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::StructuredOutputConfig;
///
/// let c: StructuredOutputConfig = from_toml_str(r#"schema = '{"type": "object", "required": ["city"]}'"#).unwrap();
/// assert_eq!(c.max_retries, 2);
/// let err = from_toml_str::<StructuredOutputConfig>(r#"schema = '{"type": 12}'"#).unwrap_err();
/// assert!(err.to_string().contains("schema"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "structured_output", builds = StructuredOutputMiddleware, validate = check_structured)]
pub struct StructuredOutputConfig {
    /// The JSON Schema the final reply must match, as JSON text (drafts 4 to 2020-12; remote `$ref`s are refused).
    pub schema: String,
    /// How many times the model is asked again, with the validation errors, before the run fails.
    #[config(default = 2, range = 0..=10)]
    pub max_retries: u32,
    /// Put the schema in the system prompt (a stable segment, the same every call).
    #[config(default = true)]
    pub instruct: bool,
}

fn check_structured(c: &StructuredOutputConfig) -> std::result::Result<(), ConfigViolation> {
    let value: Value = serde_json::from_str(&c.schema)
        .map_err(|e| ConfigViolation::new("schema", format!("is not JSON: {e}")).with_value(&c.schema))?;
    compile(&value).map_err(|e| ConfigViolation::new("schema", e).with_value(&c.schema))?;
    Ok(())
}

/// The JSON Schema validator: `boon`, behind the default feature `structured-output`.
#[cfg(feature = "structured-output")]
mod validator {
    use serde_json::Value;

    /// A compiled schema.
    pub(super) struct Compiled(boon::Schemas, boon::SchemaIndex);

    /// A loader that refuses every remote or file `$ref`: a schema is self-contained.
    struct NoLoader;

    impl boon::UrlLoader for NoLoader {
        fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
            Err(format!("`$ref` to `{url}` is not allowed: the schema must be self-contained").into())
        }
    }

    const SCHEMA_URL: &str = "urn:tinyagents:structured-output";

    /// An error and its causes, one after the other.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cause = c.source();
        }
        out
    }

    /// Compiles a schema; the error completes "the schema …".
    pub(super) fn compile(schema: &Value) -> Result<Compiled, String> {
        let mut schemas = boon::Schemas::new();
        let mut compiler = boon::Compiler::new();
        compiler.use_loader(Box::new(NoLoader));
        compiler
            .add_resource(SCHEMA_URL, schema.clone())
            .map_err(|e| format!("is not a valid JSON Schema: {}", chain(&e)))?;
        let index = compiler
            .compile(SCHEMA_URL, &mut schemas)
            .map_err(|e| format!("is not a valid JSON Schema: {}", chain(&e)))?;
        Ok(Compiled(schemas, index))
    }

    /// The leaf errors of a validation error, one line each.
    fn leaves(e: &boon::ValidationError<'_, '_>, out: &mut Vec<String>) {
        if e.causes.is_empty() {
            let at = e.instance_location.to_string();
            out.push(format!("at `{}`: {}", if at.is_empty() { "/" } else { &at }, e.kind));
        }
        for c in &e.causes {
            leaves(c, out);
        }
    }

    impl Compiled {
        /// Validates a value: the errors, one line each.
        pub(super) fn validate(&self, value: &Value) -> Result<(), Vec<String>> {
            self.0.validate(value, self.1).map_err(|e| {
                let mut out = Vec::new();
                leaves(&e, &mut out);
                if out.is_empty() {
                    out.push(e.to_string());
                }
                out
            })
        }
    }
}

/// Without the `structured-output` feature no schema can be checked: every
/// schema is refused with an error saying so.
#[cfg(not(feature = "structured-output"))]
mod validator {
    use serde_json::Value;

    /// A compiled schema (none exists without the validator).
    pub(super) enum Compiled {}

    /// Refuses: there is no validator.
    pub(super) fn compile(_schema: &Value) -> Result<Compiled, String> {
        Err(
            "cannot be checked: tinyagents was built without its `structured-output` feature (the JSON Schema \
             validator)"
                .to_owned(),
        )
    }

    impl Compiled {
        pub(super) fn validate(&self, _value: &Value) -> Result<(), Vec<String>> {
            match *self {}
        }
    }
}

use validator::{compile, Compiled};

/// The reply text without surrounding code fences.
fn unfence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = rest.split_once('\n').map_or("", |(_, body)| body);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// Per-run: the validated value (with the id of the message it came from) and the last errors.
#[derive(Debug, Default)]
struct Outcome {
    value: Mutex<Option<(MessageId, Value)>>,
}

/// Validates the final reply (a reply without tool calls) against a JSON
/// Schema. On failure the model is asked again, within the same turn, with
/// the reply and the validation errors, up to `max_retries` times; then the
/// run fails with a `Validation` error listing the last errors. A valid value
/// is put in [`AgentRun::structured_output`] when its reply is the run's
/// final message.
///
/// ```
/// use serde_json::json;
/// use tinyagents::middleware::StructuredOutputMiddleware;
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
/// let model = ScriptedModel::new([ScriptedTurn::text(r#"{"city": "Lyon"}"#)]);
/// let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::new().with(StructuredOutputMiddleware::new(schema)?)?);
/// let run = agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "Where?").await?;
/// assert_eq!(run.structured_output, Some(json!({"city": "Lyon"})));
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
///
/// With a Rust type instead of a hand-written schema, see
/// [`for_type`](Self::for_type): the schema comes from the type, a reply is
/// accepted only when it also deserialises into it, and
/// [`AgentRun::structured`] hands it back typed.
pub struct StructuredOutputMiddleware {
    schema: Value,
    compiled: std::result::Result<Compiled, String>,
    max_retries: u32,
    instruct: bool,
    native: bool,
    format_name: String,
    typed: Option<TypedCheck>,
}

/// The type a [`StructuredOutputMiddleware::for_type`] reply must deserialise into.
struct TypedCheck {
    name: String,
    check: fn(&Value) -> std::result::Result<(), String>,
}

fn deserializes_into<T: serde::de::DeserializeOwned>(value: &Value) -> std::result::Result<(), String> {
    T::deserialize(value).map(drop).map_err(|e| e.to_string())
}

/// A provider-acceptable format name from a type's schema name (`Weather`,
/// `Vec_of_String`): ASCII letters, digits, `_` and `-`, at most 64.
fn format_name(raw: &str) -> String {
    let name: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .take(64)
        .collect();
    if name.is_empty() {
        "structured_output".to_owned()
    } else {
        name
    }
}

impl std::fmt::Debug for StructuredOutputMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StructuredOutputMiddleware")
            .field("schema", &self.schema)
            .field("max_retries", &self.max_retries)
            .field("instruct", &self.instruct)
            .field("native", &self.native)
            .field("type", &self.typed.as_ref().map(|t| &t.name))
            .finish_non_exhaustive()
    }
}

impl StructuredOutputMiddleware {
    /// Validation against `schema`, 2 retries, the schema in the system
    /// prompt. An invalid schema is a `Config` error.
    pub fn new(schema: Value) -> Result<Self> {
        let compiled = compile(&schema).map_err(|e| TinyAgentsError::config_at("schema", format!("the schema {e}")))?;
        Ok(Self {
            schema,
            compiled: Ok(compiled),
            max_retries: 2,
            instruct: true,
            native: true,
            format_name: "structured_output".to_owned(),
            typed: None,
        })
    }

    /// Validation against the JSON Schema of `T` (made by `schemars`), and a
    /// reply is accepted only when it also deserialises into a `T` (a
    /// mismatch between the schema and serde's rules is asked again like a
    /// schema error); read the value back with [`AgentRun::structured`].
    ///
    /// ```
    /// use serde::Deserialize;
    /// use tinyagents::middleware::StructuredOutputMiddleware;
    /// use tinyagents::prelude::*;
    ///
    /// #[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
    /// struct City {
    ///     name: String,
    ///     population: u64,
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let model = ScriptedModel::new([ScriptedTurn::text(r#"{"name": "Lyon", "population": 522250}"#)]);
    /// let stack = MiddlewareStack::new().with(StructuredOutputMiddleware::for_type::<City>()?)?;
    /// let agent: Agent<()> = Agent::new(model).with_stack(stack);
    /// let run = agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "Biggest city near Vienne?").await?;
    /// let city: City = run.structured()?;
    /// assert_eq!(city, City { name: "Lyon".into(), population: 522250 });
    /// # Ok::<(), TinyAgentsError>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// A `Config` error when the type's schema cannot be compiled (as
    /// [`new`](Self::new)).
    pub fn for_type<T: schemars::JsonSchema + serde::de::DeserializeOwned>() -> Result<Self> {
        let mut this = Self::new(crate::harness::tool::typed::schema_for_type::<T>())?;
        let name = T::schema_name();
        this.format_name = format_name(&name);
        this.typed = Some(TypedCheck {
            name: name.into_owned(),
            check: deserializes_into::<T>,
        });
        Ok(this)
    }

    /// The same, with or without the provider-native form: by default each
    /// request carries [`ResponseFormat::JsonSchema`] (sent by
    /// OpenAI-compatible providers as `response_format`, non-strict), so the
    /// server constrains the reply too. Turn it off for a server that
    /// refuses `response_format`. Validation happens either way.
    pub fn native(mut self, native: bool) -> Self {
        self.native = native;
        self
    }

    /// The schema replies are validated against.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The same, asking again at most `n` times.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// The same, with or without the schema in the system prompt.
    pub fn instruct(mut self, instruct: bool) -> Self {
        self.instruct = instruct;
        self
    }

    /// Parses and validates a reply: the value, or the errors (one line each).
    pub fn check(&self, reply: &str) -> std::result::Result<Value, Vec<String>> {
        let compiled = self.compiled.as_ref().map_err(|e| vec![format!("the schema {e}")])?;
        let value: Value =
            serde_json::from_str(unfence(reply)).map_err(|e| vec![format!("the reply is not JSON: {e}")])?;
        compiled.validate(&value)?;
        if let Some(typed) = &self.typed {
            (typed.check)(&value).map_err(|e| vec![format!("the reply is not a valid `{}`: {e}", typed.name)])?;
        }
        Ok(value)
    }

    fn instruction(&self) -> String {
        format!(
            "Answer with a single JSON value, with no other text and no code fences, that matches this JSON Schema:\n{}",
            self.schema
        )
    }
}

impl From<StructuredOutputConfig> for StructuredOutputMiddleware {
    fn from(c: StructuredOutputConfig) -> Self {
        // `validate` checked the schema; a config built in code unchecked
        // fails every final reply clearly instead.
        let schema: Value = serde_json::from_str(&c.schema).unwrap_or(Value::Null);
        let compiled = compile(&schema);
        Self {
            schema,
            compiled,
            max_retries: c.max_retries,
            instruct: c.instruct,
            native: true,
            format_name: "structured_output".to_owned(),
            typed: None,
        }
    }
}

/// Validates the final reply against a JSON Schema, asking again with the errors, into `AgentRun::structured_output`.
#[middleware(
    builtin,
    name = "structured_output",
    config = StructuredOutputConfig,
    before_if_present = ["output_limit_recovery", "model_retry", "model_fallback", "timeout"],
    doc(
        mutation = "Adds the schema as a stable system segment `structured_output` (with `instruct`) and sets `request.response_format` (unless already set or `native(false)`; OpenAI-compatible providers send it as `response_format`); on an invalid final reply, sends the same request plus the reply and a user message listing the errors (never stored); sets `AgentRun::structured_output` in `after_agent`.",
        events = "`Notice { source: \"structured_output\" }` with the errors and `AttemptDiscarded` for each rejected reply; an explicit state update `structured_output_errors` with the last errors.",
        failure = "Fails clearly: after `max_retries` re-asks the turn fails with a `Validation` error listing the last errors (each `at <pointer>: <rule>`); an invalid schema is rejected when it is built (every schema, when tinyagents is built without its default `structured-output` feature). Replies with tool calls pass unvalidated.",
        streaming = "Every attempt streams; a rejected reply's deltas are announced with `AttemptDiscarded` so clients drop them. Validation needs the whole reply, so it happens after the stream.",
        cache = "The schema segment is stable (the same text every call) and sits with the stable prefix: one cache write, then reuse; re-asks append at the tail.",
        retries = "A wrap ordered outside output-limit recovery, retry, fallback and timeout (it declares `before` them): it validates the merged reply of a recovered turn, and each re-ask is retried or falls back on errors; a schema failure is not a model error, so retry middleware never sees it."
    )
)]
impl StructuredOutputMiddleware {
    #[before_model]
    fn instruct_model(&self, request: &mut ModelRequest) -> Result<()> {
        if self.native && request.response_format.is_none() && self.compiled.is_ok() {
            request.response_format = Some(ResponseFormat::JsonSchema {
                name: self.format_name.clone(),
                schema: self.schema.clone(),
                strict: false,
            });
        }
        if !self.instruct || request.segment(STRUCTURED_OUTPUT_SEGMENT).is_some() {
            return Ok(());
        }
        let at = request
            .system
            .iter()
            .rposition(|s| s.stability == SegmentStability::Stable)
            .map_or(0, |i| i + 1);
        request
            .system
            .insert(at, PromptSegment::stable(STRUCTURED_OUTPUT_SEGMENT, self.instruction()));
        Ok(())
    }

    #[wrap_model]
    async fn validate<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        mut request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<ModelResponse> {
        let mut asked_again = 0;
        loop {
            let response = next.run(ctx, state, request.clone()).await?.into_response();
            if !response.message.tool_calls.is_empty() {
                return Ok(response);
            }
            let errors = match self.check(&response.message.text()) {
                Ok(value) => {
                    *ctx.locals()
                        .local::<Outcome>()
                        .value
                        .lock()
                        .expect("structured output lock") = Some((response.message.id.clone(), value));
                    return Ok(response);
                }
                Err(errors) => errors,
            };
            ctx.flow_mut()
                .update_state("structured_output_errors", Value::from(errors.clone()));
            if asked_again >= self.max_retries {
                return Err(TinyAgentsError::validation(format!(
                    "the final reply does not match the output schema after {} attempt(s); last errors: {}",
                    asked_again + 1,
                    errors.join("; ")
                )));
            }
            asked_again += 1;
            let attempt = ctx.counters().model_calls;
            ctx.events()
                .emit_with(EventKind::AttemptDiscarded, || AgentEvent::AttemptDiscarded {
                    run_id: ctx.run_id().clone(),
                    attempt,
                    reason: "the reply failed output-schema validation; the model is asked again".into(),
                });
            ctx.events().emit_with(EventKind::Notice, || AgentEvent::Notice {
                source: "structured_output".into(),
                message: format!("reply rejected ({}), asking again: {}", asked_again, errors.join("; ")),
                is_error: false,
            });
            let mut reply = Message::assistant(response.message.text().into_owned());
            reply.id = response.message.id.clone();
            request.messages.push(reply);
            request.messages.push(Message::user(format!(
                "Your reply does not match the required JSON Schema:\n- {}\nReply again with only a JSON value that matches the schema.",
                errors.join("\n- ")
            )));
        }
    }

    #[after_agent]
    fn publish<C>(&self, ctx: &mut RunContext<C>, run: &mut AgentRun) -> Result<()> {
        let outcome = ctx.locals().local::<Outcome>();
        let value = outcome.value.lock().expect("structured output lock");
        if let (Some((id, value)), Some(last)) = (value.as_ref(), run.final_message.as_ref())
            && &last.id == id
        {
            run.structured_output = Some(value.clone());
        }
        Ok(())
    }
}
