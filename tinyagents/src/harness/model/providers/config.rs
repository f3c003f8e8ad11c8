//! [`ProviderConfig`]: which provider, which model, where, and with which key.
//!
//! A model is named by a `provider:model` string. The provider part picks the
//! wire format and the defaults; everything after the first `:` is the model
//! name, sent as is (so `ollama:llama3.2:3b` names the model `llama3.2:3b`).
//!
//! | provider            | wire format       | default base URL             | key variable (required?)           | base URL variable            |
//! |---------------------|-------------------|------------------------------|------------------------------------|------------------------------|
//! | `openai`            | Chat Completions  | `https://api.openai.com/v1`  | `OPENAI_API_KEY` (yes)             | `OPENAI_BASE_URL`            |
//! | `anthropic`         | Messages          | `https://api.anthropic.com`  | `ANTHROPIC_API_KEY` (yes)          | `ANTHROPIC_BASE_URL`         |
//! | `openai-compatible` | Chat Completions  | none: set it                 | `OPENAI_COMPATIBLE_API_KEY` (no)   | `OPENAI_COMPATIBLE_BASE_URL` |
//! | `ollama`            | Chat Completions  | `http://localhost:11434/v1`  | `OLLAMA_API_KEY` (no)              | `OLLAMA_BASE_URL`            |
//! | `vllm`              | Chat Completions  | `http://localhost:8000/v1`   | `VLLM_API_KEY` (no)                | `VLLM_BASE_URL`              |
//! | `llamacpp`          | Chat Completions  | `http://localhost:8080/v1`   | `LLAMACPP_API_KEY` (no)            | `LLAMACPP_BASE_URL`          |
//!
//! Base URLs are taken the way the official SDKs take them, with or without
//! the version segment and with any trailing slash: the Messages API posts
//! to `{base}/v1/messages` (`http://host` and `http://host/v1` both work),
//! Chat Completions to `{base}/chat/completions` (a bare `http://host:8000`
//! gets `/v1`). So an `OPENAI_BASE_URL` or `ANTHROPIC_BASE_URL` already set
//! for the official SDKs works unchanged ([`ProviderConfig::endpoint`]).
//!
//! ```
//! use tinyagents::harness::model::providers::{ProviderConfig, ProviderKind};
//!
//! // From code: no environment read.
//! let config = ProviderConfig::parse("ollama:llama3.2:3b")?;
//! assert_eq!(config.kind(), ProviderKind::OpenAiCompatible);
//! assert_eq!(config.model(), "llama3.2:3b");
//! assert_eq!(config.base_url(), "http://localhost:11434/v1");
//!
//! // From the environment, with a lookup you control (here: nothing is set).
//! let config = ProviderConfig::from_env_with("openai:gpt-4o-mini", |_| None)?;
//! let err = config.validate().unwrap_err(); // `build` says the same
//! assert!(err.to_string().contains("`OPENAI_API_KEY` is not set"));
//! # Ok::<(), tinyagents::TinyAgentsError>(())
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::model::ChatModel;
use crate::harness::secrets::{mask_url, redactor};

/// The wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProviderKind {
    /// OpenAI's Chat Completions API at OpenAI (`max_completion_tokens`).
    OpenAi,
    /// The Chat Completions wire format on another server: vLLM, llama.cpp's
    /// server, Ollama, and the like (`max_tokens`).
    OpenAiCompatible,
    /// Anthropic's Messages API.
    Anthropic,
}

impl ProviderKind {
    /// The cargo feature of `tinyagents` that compiles this provider in.
    pub const fn feature(self) -> &'static str {
        match self {
            Self::OpenAi | Self::OpenAiCompatible => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

/// One known provider name and its defaults.
struct Preset {
    name: &'static str,
    kind: ProviderKind,
    base_url: Option<&'static str>,
    key_env: &'static str,
    key_required: bool,
    base_url_env: &'static str,
}

const PRESETS: &[Preset] = &[
    Preset {
        name: "openai",
        kind: ProviderKind::OpenAi,
        base_url: Some("https://api.openai.com/v1"),
        key_env: "OPENAI_API_KEY",
        key_required: true,
        base_url_env: "OPENAI_BASE_URL",
    },
    Preset {
        name: "anthropic",
        kind: ProviderKind::Anthropic,
        base_url: Some("https://api.anthropic.com"),
        key_env: "ANTHROPIC_API_KEY",
        key_required: true,
        base_url_env: "ANTHROPIC_BASE_URL",
    },
    Preset {
        name: "openai-compatible",
        kind: ProviderKind::OpenAiCompatible,
        base_url: None,
        key_env: "OPENAI_COMPATIBLE_API_KEY",
        key_required: false,
        base_url_env: "OPENAI_COMPATIBLE_BASE_URL",
    },
    Preset {
        name: "ollama",
        kind: ProviderKind::OpenAiCompatible,
        base_url: Some("http://localhost:11434/v1"),
        key_env: "OLLAMA_API_KEY",
        key_required: false,
        base_url_env: "OLLAMA_BASE_URL",
    },
    Preset {
        name: "vllm",
        kind: ProviderKind::OpenAiCompatible,
        base_url: Some("http://localhost:8000/v1"),
        key_env: "VLLM_API_KEY",
        key_required: false,
        base_url_env: "VLLM_BASE_URL",
    },
    Preset {
        name: "llamacpp",
        kind: ProviderKind::OpenAiCompatible,
        base_url: Some("http://localhost:8080/v1"),
        key_env: "LLAMACPP_API_KEY",
        key_required: false,
        base_url_env: "LLAMACPP_BASE_URL",
    },
];

/// The names `provider:model` strings accept, in the order of the table above.
pub const PROVIDER_NAMES: &[&str] = &["openai", "anthropic", "openai-compatible", "ollama", "vllm", "llamacpp"];

/// The environment variable that names the model for programs that offer a
/// real provider (the quickstart, for one): `TINYAGENTS_MODEL=openai:gpt-4o-mini`.
pub const MODEL_ENV: &str = "TINYAGENTS_MODEL";

/// How to reach one model of one provider.
///
/// Build one with [`parse`](Self::parse) (defaults only) or
/// [`from_env`](Self::from_env) (defaults, then the environment), adjust it
/// with the `with_*` methods, then [`build`](Self::build) the [`ChatModel`].
///
/// Every secret it is given (the API key, each header value, the base URL's
/// user info and query values) is learnt by the process's
/// [`Redactor`](crate::harness::secrets::Redactor), so no error of the
/// model, and no `Debug` output, shows it: `Debug` prints no key and no
/// header, and the base URL [masked](crate::harness::secrets::mask_url).
#[derive(Clone)]
pub struct ProviderConfig {
    provider: String,
    kind: ProviderKind,
    model: String,
    base_url: Option<String>,
    base_url_env: Option<String>,
    api_key: Option<String>,
    api_key_env: Option<String>,
    key_required: bool,
    headers: Vec<(String, String)>,
    connect_timeout: Duration,
    idle_timeout: Duration,
    streaming: bool,
    prompt_caching: bool,
    default_max_tokens: u32,
    #[cfg(any(feature = "openai", feature = "anthropic"))]
    http_client: Option<reqwest::Client>,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("provider", &self.provider)
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("base_url", &self.base_url.as_deref().map(mask_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

impl ProviderConfig {
    /// The default connect timeout.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default idle timeout: the longest wait for the next bytes of a reply.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
    /// The output limit sent when a request sets none and the provider requires
    /// one (Anthropic does).
    pub const DEFAULT_MAX_TOKENS: u32 = 4096;

    /// A configuration for a `provider:model` string, with the provider's
    /// defaults and no key. Reads no environment.
    ///
    /// # Errors
    /// A [`Config`](TinyAgentsError::Config) error when the string has no
    /// `provider:` prefix, names an unknown provider, or has an empty model.
    pub fn parse(spec: &str) -> Result<Self> {
        let spec = spec.trim();
        let Some((provider, model)) = spec.split_once(':') else {
            return Err(TinyAgentsError::config(format!(
                "model `{spec}` has no provider: write `provider:model`, e.g. `openai:gpt-4o-mini` \
                 (providers: {})",
                PROVIDER_NAMES.join(", ")
            )));
        };
        let provider = provider.trim().to_ascii_lowercase();
        let model = model.trim();
        let Some(preset) = PRESETS.iter().find(|p| p.name == provider) else {
            return Err(TinyAgentsError::config(format!(
                "unknown model provider `{provider}` in `{spec}`; the providers are: {}{}",
                PROVIDER_NAMES.join(", "),
                crate::config::suggest::did_you_mean(&provider, PROVIDER_NAMES.iter().copied())
            )));
        };
        if model.is_empty() {
            return Err(TinyAgentsError::config(format!(
                "model `{spec}` names no model after `{provider}:`"
            )));
        }
        Ok(Self {
            provider,
            kind: preset.kind,
            model: model.to_owned(),
            base_url: preset.base_url.map(str::to_owned),
            base_url_env: Some(preset.base_url_env.to_owned()),
            api_key: None,
            api_key_env: Some(preset.key_env.to_owned()),
            key_required: preset.key_required,
            headers: Vec::new(),
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            streaming: true,
            prompt_caching: true,
            default_max_tokens: Self::DEFAULT_MAX_TOKENS,
            #[cfg(any(feature = "openai", feature = "anthropic"))]
            http_client: None,
        })
    }

    /// [`parse`](Self::parse), then the provider's API key and base URL
    /// variables from the process environment (see the module table). A
    /// missing key is not an error here: [`build`](Self::build) reports it,
    /// naming the variable.
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn from_env(spec: &str) -> Result<Self> {
        Self::from_env_with(spec, |name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) with your own lookup (a secret store, or a
    /// map in a test). Empty values count as unset.
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn from_env_with(spec: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let mut config = Self::parse(spec)?;
        let get = |name: &Option<String>| {
            name.as_deref()
                .and_then(&lookup)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if let Some(key) = get(&config.api_key_env) {
            config = config.with_api_key(key);
        }
        if let Some(url) = get(&config.base_url_env) {
            config = config.with_base_url(url);
        }
        Ok(config)
    }

    /// The same configuration with this base URL (a local server, a proxy, a gateway).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        let base_url = base_url.into();
        redactor().add_url(&base_url);
        self.base_url = Some(base_url);
        self
    }

    /// The same configuration calling the provider through your own HTTP
    /// client: custom root certificates, a client certificate, a proxy, a
    /// DNS resolver, connection-pool settings.
    ///
    /// The API key and the configured headers are still sent, on each request.
    /// The client's own timeouts apply instead of
    /// [`with_connect_timeout`](Self::with_connect_timeout) and
    /// [`with_idle_timeout`](Self::with_idle_timeout) (a built client cannot
    /// be changed): give it a `connect_timeout` and a `read_timeout`, or a
    /// stalled server holds a call until the run's own limits end it. The
    /// size bounds on every read hold whatever the client. So does its
    /// redirect policy: the built-in client follows none (a redirect would
    /// re-send the key and the conversation elsewhere, and is refused as an
    /// error); give yours `.redirect(reqwest::redirect::Policy::none())`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tinyagents::harness::model::providers::ProviderConfig;
    ///
    /// let client = reqwest::Client::builder()
    ///     .redirect(reqwest::redirect::Policy::none())
    ///     .connect_timeout(Duration::from_secs(10))
    ///     .read_timeout(Duration::from_secs(120))
    ///     // .add_root_certificate(cert).proxy(reqwest::Proxy::https("http://proxy:3128")?)
    ///     .build()
    ///     .unwrap();
    /// let model = ProviderConfig::parse("openai:gpt-4o-mini")
    ///     .unwrap()
    ///     .with_api_key("sk-test")
    ///     .with_http_client(client)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(model.id(), "openai:gpt-4o-mini");
    /// ```
    #[cfg(any(feature = "openai", feature = "anthropic"))]
    #[cfg_attr(docsrs, doc(cfg(any(feature = "openai", feature = "anthropic"))))]
    pub fn with_http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// The caller's HTTP client, when one was given.
    #[cfg(any(feature = "openai", feature = "anthropic"))]
    pub(crate) fn http_client(&self) -> Option<&reqwest::Client> {
        self.http_client.as_ref()
    }

    /// The same configuration with this API key.
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        let api_key = api_key.into();
        redactor().add(&api_key);
        self.api_key = Some(api_key);
        self
    }

    /// The same configuration reading its key from `variable` instead of the
    /// provider's default, now: a set variable replaces the key. Error
    /// messages name this variable.
    pub fn with_api_key_env(mut self, variable: impl Into<String>) -> Self {
        let variable = variable.into();
        if let Some(key) = std::env::var(&variable).ok().filter(|v| !v.trim().is_empty()) {
            self = self.with_api_key(key.trim());
        }
        self.api_key_env = Some(variable);
        self
    }

    /// The same configuration, requiring a key or not (an OpenAI-compatible
    /// server behind an authenticating gateway needs one).
    pub fn with_key_required(mut self, required: bool) -> Self {
        self.key_required = required;
        self
    }

    /// The same configuration with another model name (same provider).
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// The same configuration sending one more HTTP header on every call
    /// (`OpenAI-Organization`, `anthropic-beta`, a gateway's `api-key`).
    /// The value is marked sensitive on the wire; when the header's name
    /// says it carries a credential
    /// ([`Redactor::is_credential_header`](crate::harness::secrets::Redactor::is_credential_header):
    /// `api-key`, `Authorization`, `x-auth-token`, …) it is also masked in
    /// every error and log line. A credential under another name:
    /// [`with_secret_header`](Self::with_secret_header).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        if crate::harness::secrets::Redactor::is_credential_header(&name) {
            redactor().add_header_value(&value);
        }
        self.headers.push((name, value));
        self
    }

    /// The same configuration sending one more HTTP header whose value is a
    /// credential whatever its name: marked sensitive on the wire and masked
    /// in every error and log line.
    pub fn with_secret_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let value = value.into();
        redactor().add_header_value(&value);
        self.headers.push((name.into(), value));
        self
    }

    /// The same configuration with a connect timeout.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The same configuration with an idle timeout: how long to wait for the
    /// next bytes of a reply (the first token of a reasoning model can take minutes).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// The same configuration streaming (the default) or not. Without
    /// streaming, [`ChatModel::stream`] makes one non-streaming call and
    /// replays the whole reply as deltas (for servers whose streaming is broken).
    pub fn with_streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// The same configuration with explicit prompt caching on (the default) or
    /// off. Anthropic: the last stable system segment carries a `cache_control`
    /// breakpoint, so tools and the stable prefix are cached. OpenAI caches
    /// prefixes by itself; this setting does not change its requests.
    pub fn with_prompt_caching(mut self, enabled: bool) -> Self {
        self.prompt_caching = enabled;
        self
    }

    /// The same configuration with the output limit sent when a request sets
    /// none and the provider requires one (Anthropic).
    pub fn with_default_max_tokens(mut self, max_tokens: u32) -> Self {
        self.default_max_tokens = max_tokens;
        self
    }

    /// The provider's name, as in the `provider:model` string.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The wire format.
    pub fn kind(&self) -> ProviderKind {
        self.kind
    }

    /// The model name sent to the provider.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The model's id: `provider:model`.
    pub fn id(&self) -> String {
        format!("{}:{}", self.provider, self.model)
    }

    /// The base URL (empty when the provider has no default and none was set).
    pub fn base_url(&self) -> &str {
        self.base_url.as_deref().unwrap_or_default()
    }

    /// The environment variable the key is read from, when there is one.
    pub fn api_key_env(&self) -> Option<&str> {
        self.api_key_env.as_deref()
    }

    /// Whether a key is set.
    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// The extra headers.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The idle timeout.
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// Whether calls stream.
    pub fn streaming(&self) -> bool {
        self.streaming
    }

    /// Whether explicit prompt caching is on.
    pub fn prompt_caching(&self) -> bool {
        self.prompt_caching
    }

    /// The output limit sent when a request sets none and the provider requires one.
    pub fn default_max_tokens(&self) -> u32 {
        self.default_max_tokens
    }

    pub(crate) fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    /// Checks the configuration: a base URL is set and well-formed, and a
    /// required key is present.
    ///
    /// # Errors
    /// A [`Config`](TinyAgentsError::Config) error naming the variable to set.
    pub fn validate(&self) -> Result<()> {
        let id = self.id();
        let Some(base) = self.base_url.as_deref().filter(|b| !b.trim().is_empty()) else {
            return Err(TinyAgentsError::config(format!(
                "model `{id}` has no base URL: set the environment variable `{}` \
                 (e.g. `http://localhost:8000/v1`) or call `ProviderConfig::with_base_url`",
                self.base_url_env.as_deref().unwrap_or("OPENAI_COMPATIBLE_BASE_URL")
            )));
        };
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(TinyAgentsError::config(format!(
                "model `{id}` has the base URL `{}`, which is not an http:// or https:// URL",
                mask_url(base)
            )));
        }
        if self.key_required && self.api_key.is_none() {
            return Err(TinyAgentsError::config(match &self.api_key_env {
                Some(var) => format!(
                    "model `{id}` needs an API key: the environment variable `{var}` is not set \
                     (set it, or call `ProviderConfig::with_api_key`)"
                ),
                None => format!("model `{id}` needs an API key: call `ProviderConfig::with_api_key`"),
            }));
        }
        Ok(())
    }

    /// Builds the model.
    ///
    /// # Errors
    /// A [`Config`](TinyAgentsError::Config) error when [`validate`](Self::validate)
    /// fails, when the provider's cargo feature is off, or when the HTTP client
    /// cannot be built.
    pub fn build(self) -> Result<Arc<dyn ChatModel>> {
        match self.kind {
            #[cfg(feature = "openai")]
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => Ok(Arc::new(super::OpenAiModel::new(self)?)),
            #[cfg(feature = "anthropic")]
            ProviderKind::Anthropic => Ok(Arc::new(super::AnthropicModel::new(self)?)),
            #[allow(unreachable_patterns)]
            kind => Err(TinyAgentsError::config(format!(
                "model `{}` needs the cargo feature `{}` of tinyagents (or `providers`, for all of them)",
                self.id(),
                kind.feature()
            ))),
        }
    }

    /// The URL the model posts to, from the base URL as the official SDKs
    /// accept it: trailing slashes ignored; for the Messages API
    /// `{base}/v1/messages` whether or not the base ends in `/v1`; for Chat
    /// Completions `{base}/chat/completions`, with `/v1` added when the base
    /// is a bare host (`http://localhost:8000`).
    ///
    /// ```
    /// use tinyagents::harness::model::providers::ProviderConfig;
    ///
    /// let at = |model: &str, base: &str| ProviderConfig::parse(model).unwrap().with_base_url(base).endpoint();
    /// assert_eq!(at("anthropic:m", "http://h:1"), "http://h:1/v1/messages");
    /// assert_eq!(at("anthropic:m", "http://h:1/v1/"), "http://h:1/v1/messages");
    /// assert_eq!(at("vllm:m", "http://h:1"), "http://h:1/v1/chat/completions");
    /// assert_eq!(at("vllm:m", "http://h:1/v1/"), "http://h:1/v1/chat/completions");
    /// assert_eq!(at("openai:m", "https://proxy/openai/v1"), "https://proxy/openai/v1/chat/completions");
    /// // a query (a gateway's `api-key`, Azure's `api-version`) stays after the path
    /// assert_eq!(at("vllm:m", "http://h:1/v1/?api-version=2"), "http://h:1/v1/chat/completions?api-version=2");
    /// ```
    pub fn endpoint(&self) -> String {
        let full = self.base_url();
        let (base, query) = match full.find('?') {
            Some(q) => (&full[..q], &full[q..]),
            None => (full, ""),
        };
        let base = base.trim_end_matches('/');
        let after_scheme = base.split_once("://").map_or(base, |(_, rest)| rest);
        let bare_host = !after_scheme.contains('/');
        match self.kind {
            ProviderKind::Anthropic => {
                format!("{}/v1/messages{query}", base.strip_suffix("/v1").unwrap_or(base))
            }
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible if bare_host => {
                format!("{base}/v1/chat/completions{query}")
            }
            ProviderKind::OpenAi | ProviderKind::OpenAiCompatible => format!("{base}/chat/completions{query}"),
        }
    }

    /// The model name a request asks for, when it overrides this model's:
    /// `model` alone, or `provider:model` with this provider's name.
    pub(crate) fn requested_model<'a>(&'a self, requested: Option<&'a str>) -> Result<&'a str> {
        let Some(requested) = requested.map(str::trim).filter(|r| !r.is_empty()) else {
            return Ok(&self.model);
        };
        match requested.split_once(':') {
            Some((provider, model)) if provider.eq_ignore_ascii_case(&self.provider) => Ok(model),
            Some((provider, _)) if PROVIDER_NAMES.iter().any(|p| p.eq_ignore_ascii_case(provider)) => {
                Err(TinyAgentsError::config(format!(
                    "the run asks for model `{requested}`, but this model is `{}`: a request can change \
                     the model name, not the provider; route the call to another model instead \
                     (`ModelRequest::route`)",
                    self.id()
                )))
            }
            _ => Ok(requested),
        }
    }
}

/// Builds the model a `provider:model` string names, with its key and base
/// URL from the environment.
///
/// ```no_run
/// use tinyagents::prelude::*;
/// use tinyagents::harness::model::providers::model_from_env;
///
/// # fn main() -> Result<()> {
/// let agent: Agent<()> = Agent::from_shared(model_from_env("openai:gpt-4o-mini")?);
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`ProviderConfig::parse`] and [`ProviderConfig::build`]: a missing key
/// is a [`Config`](TinyAgentsError::Config) error naming its variable.
pub fn model_from_env(spec: &str) -> Result<Arc<dyn ChatModel>> {
    ProviderConfig::from_env(spec)?.build()
}

/// The model named by the [`MODEL_ENV`] variable (`TINYAGENTS_MODEL`), or
/// `None` when it is unset or empty: the switch a program offers between its
/// scripted model and a real one.
///
/// # Errors
/// As [`model_from_env`], for the string the variable holds.
pub fn model_from_default_env() -> Result<Option<Arc<dyn ChatModel>>> {
    match std::env::var(MODEL_ENV).ok().filter(|v| !v.trim().is_empty()) {
        Some(spec) => model_from_env(&spec).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn the_name_list_matches_the_presets() {
        let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
        assert_eq!(names, PROVIDER_NAMES);
    }

    #[test]
    fn parses_provider_and_model_keeping_colons_in_the_model() {
        let c = ProviderConfig::parse("ollama:llama3.2:3b").unwrap();
        assert_eq!((c.provider(), c.model()), ("ollama", "llama3.2:3b"));
        assert_eq!(c.id(), "ollama:llama3.2:3b");
        assert_eq!(c.endpoint(), "http://localhost:11434/v1/chat/completions");
        let c = ProviderConfig::parse(" Anthropic:claude-sonnet-4-5 ").unwrap();
        assert_eq!(c.kind(), ProviderKind::Anthropic);
        assert_eq!(c.endpoint(), "https://api.anthropic.com/v1/messages");
    }

    #[test]
    fn rejects_strings_without_a_known_provider() {
        let e = ProviderConfig::parse("gpt-4o").unwrap_err().to_string();
        assert!(e.contains("write `provider:model`"), "{e}");
        let e = ProviderConfig::parse("opneai:gpt-4o").unwrap_err().to_string();
        assert!(
            e.contains("unknown model provider `opneai`") && e.contains("openai, anthropic"),
            "{e}"
        );
        let e = ProviderConfig::parse("openai:").unwrap_err().to_string();
        assert!(e.contains("names no model"), "{e}");
    }

    #[test]
    fn a_missing_key_is_a_config_error_naming_the_variable() {
        let err = ProviderConfig::from_env_with("anthropic:claude", env(&[]))
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(err.kind(), crate::harness::error::ErrorKind::Config);
        assert!(err.to_string().contains("`ANTHROPIC_API_KEY` is not set"), "{err}");
        // an empty value counts as unset
        let err = ProviderConfig::from_env_with("openai:gpt", env(&[("OPENAI_API_KEY", " ")]))
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("`OPENAI_API_KEY` is not set"), "{err}");
        // local servers need none
        ProviderConfig::from_env_with("ollama:llama3", env(&[]))
            .unwrap()
            .validate()
            .unwrap();
    }

    #[test]
    fn only_a_credential_header_is_learnt_as_a_secret() {
        use crate::harness::secrets::redactor;
        let _ = ProviderConfig::parse("openai:gpt")
            .unwrap()
            .with_header("x-routing-scenario", "weather-routing-plain")
            .with_header("X-Auth-Token", "tok-credential-0123456789")
            .with_secret_header("x-tenant", "tenant-credential-9876543210");
        // a routing header's value is an ordinary word in errors: never masked
        assert_eq!(redactor().redact("weather-routing-plain"), "weather-routing-plain");
        assert_eq!(redactor().redact("tok-credential-0123456789"), "***");
        assert_eq!(redactor().redact("tenant-credential-9876543210"), "***");
    }

    #[test]
    fn the_environment_sets_key_and_base_url() {
        let c = ProviderConfig::from_env_with(
            "openai:gpt-4o",
            env(&[
                ("OPENAI_API_KEY", "sk-1"),
                ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/"),
            ]),
        )
        .unwrap();
        assert_eq!(c.api_key(), Some("sk-1"));
        assert_eq!(c.endpoint(), "http://127.0.0.1:9/v1/chat/completions");
        assert!(!format!("{c:?}").contains("sk-1"), "Debug must not print the key");
        let c = c
            .with_base_url("https://me:pw-in-url@gw.example/v1?api-key=sk-in-query-1&api-version=1")
            .with_header("api-key", "sk-in-header-1");
        let shown = format!("{c:?}");
        for secret in ["pw-in-url", "sk-in-query-1", "sk-in-header-1"] {
            assert!(!shown.contains(secret), "Debug must not print `{secret}`: {shown}");
        }
        assert!(
            shown.contains("https://me:***@gw.example/v1?api-key=***&api-version=1"),
            "{shown}"
        );
    }

    #[test]
    fn a_compatible_server_needs_a_base_url_naming_its_variable() {
        let err = ProviderConfig::from_env_with("openai-compatible:qwen", env(&[]))
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("`OPENAI_COMPATIBLE_BASE_URL`"), "{err}");
        ProviderConfig::from_env_with(
            "openai-compatible:qwen",
            env(&[("OPENAI_COMPATIBLE_BASE_URL", "http://localhost:1/v1")]),
        )
        .unwrap()
        .validate()
        .unwrap();
    }

    #[test]
    fn a_request_may_rename_the_model_but_not_change_the_provider() {
        let c = ProviderConfig::parse("openai:gpt-4o").unwrap();
        assert_eq!(c.requested_model(None).unwrap(), "gpt-4o");
        assert_eq!(c.requested_model(Some("gpt-4o-mini")).unwrap(), "gpt-4o-mini");
        assert_eq!(c.requested_model(Some("openai:o3")).unwrap(), "o3");
        let e = c.requested_model(Some("anthropic:claude")).unwrap_err().to_string();
        assert!(e.contains("not the provider"), "{e}");
        let c = ProviderConfig::parse("ollama:llama3").unwrap();
        assert_eq!(c.requested_model(Some("qwen3:8b")).unwrap(), "qwen3:8b");
    }
}
