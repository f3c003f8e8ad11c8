//! Agent configuration files: [`ConfigFile`] (a parsed TOML file that can
//! say where each key is), [`FileErrors`] (every problem, each with its line
//! and column) and [`MiddlewareRegistry::build_file`].
//!
//! The file format is described on [`ConfigFile`].
//!
//! The top-level sections are [`FILE_SECTIONS`]; any other key is an error.

use std::fmt;
use std::path::Path;

use std::collections::BTreeMap;

use serde::Deserialize as _;
use serde_json::Value;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::error::{ConfigError, ConfigErrors};
use super::registry::MiddlewareRegistry;
use super::suggest::{did_you_mean, list};
use crate::harness::error::TinyAgentsError;
use crate::harness::middleware::MiddlewareStack;

/// The top-level sections of an agent file: `middleware` and `hooks` build
/// the stack; `store` names where shared state lives (`[store] url`, checked
/// by [`StoreUrl::of_section`](crate::store::StoreUrl::of_section)); `agent`,
/// `model` and `script` are read by the `tinyagents` command (the prompt, the
/// system prompt, the step limit, the real model to call and the scripted
/// model's replies); `preset` names a [preset](crate::presets) the stack
/// starts from.
pub const FILE_SECTIONS: [&str; 7] = ["middleware", "hooks", "store", "agent", "model", "script", "preset"];

/// A place in a file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// A [`ConfigError`] and where in the file it is.
#[derive(Debug, Clone, PartialEq)]
pub struct LocatedError {
    /// The error (path, value, rule).
    pub error: ConfigError,
    /// Where the path points in the file: the value when the key is present,
    /// the header or key that opens a table (implicit tables of dotted
    /// headers such as `[oops.deeper]` included), else the nearest enclosing
    /// table, else the start of the file (1:1). `None` only when the file
    /// could not be read at all.
    pub location: Option<Location>,
}

/// Every problem found in a configuration file, each with its location.
/// Displays one per line, as ``agent.toml:7:21: `middleware[2].max_steps` = 0: must be in 1..=100``.
#[derive(Debug, Clone, PartialEq)]
pub struct FileErrors {
    /// The file's name, as given.
    pub file: String,
    /// The errors, in the order found (never empty when returned as an error).
    pub errors: Vec<LocatedError>,
}

impl FileErrors {
    /// How many.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
}

impl fmt::Display for FileErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            match e.location {
                Some(at) => write!(f, "{}:{at}: {}", self.file, e.error)?,
                None => write!(f, "{}: {}", self.file, e.error)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for FileErrors {}

impl From<FileErrors> for TinyAgentsError {
    fn from(errors: FileErrors) -> Self {
        TinyAgentsError::config(errors.to_string())
    }
}

/// A parsed TOML configuration file: its value (as JSON, as the config
/// readers take it) and its syntax tree, to say where a path is.
///
/// The file format:
///
/// ```toml
/// # Middleware, in order. Options are inline; `enabled = false` removes an entry
/// # (and a built-in that is on by default).
/// [[middleware]]
/// type = "logging"
/// level = "debug"
///
/// # External command hooks (see `tinyagents::external_hooks`): one `external_hooks`
/// # middleware; it runs before every `[[middleware]]` entry, so the guards
/// # judge what a hook rewrites. Policy hooks fail closed by default.
/// [[hooks]]
/// event = "pre_tool_use"
/// matcher = "^shell$"
/// command = "./scripts/check-shell.sh"
/// timeout_ms = 5000
///
/// # Read by the `tinyagents` command only.
/// [agent]
/// prompt = "List the files."
/// [[script]]
/// text = "Done."
/// ```
///
/// The top-level sections are [`FILE_SECTIONS`]; any other key is an error.
/// Defaults (built-ins on by default) come first, then the entries. Errors:
///
/// ```
/// use tinyagents::config::{ConfigFile, Location};
///
/// let file = ConfigFile::parse("agent.toml", "[[middleware]]\ntype = \"logging\"\nlevel = \"loud\"\n").unwrap();
/// assert_eq!(file.value()["middleware"][0]["level"], "loud");
/// assert_eq!(file.locate("middleware[0].level"), Some(Location { line: 3, column: 9 }));
///
/// let bad = ConfigFile::parse("agent.toml", "[[middleware]]\ntype = ").unwrap_err();
/// assert!(bad.to_string().starts_with("agent.toml:2:"));
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct ConfigFile {
    name: String,
    #[educe(Debug(ignore))]
    text: String,
    value: Value,
    /// Where each key and value is written (byte offsets), from the one parse.
    #[educe(Debug(ignore))]
    spans: SpanNode,
}

impl ConfigFile {
    /// Parses `text`; `name` (usually the path) prefixes every error.
    pub fn parse(name: impl Into<String>, text: impl Into<String>) -> Result<Self, FileErrors> {
        let name = name.into();
        let text = text.into();
        let syntax_error = |message: String, span: Option<std::ops::Range<usize>>| FileErrors {
            file: name.clone(),
            errors: vec![LocatedError {
                error: ConfigError::new("", None, format!("invalid TOML: {}", message.trim_end())),
                location: Some(span.map_or(START, |s| location_of(&text, s.start))),
            }],
        };
        // One parse: the spanned syntax tree gives both where each key is and,
        // deserialized in place (no second parse), the values.
        let root = match DeTable::parse(&text) {
            Ok(root) => root,
            Err(e) => return Err(syntax_error(e.message().to_owned(), e.span())),
        };
        let spans = SpanNode::of_table(root.get_ref(), Some(root.span().start));
        let value = match toml::Table::deserialize(toml::de::Deserializer::from(root)) {
            Ok(table) => super::traits::toml_table_to_value(table),
            Err(e) => return Err(syntax_error(e.message().to_owned(), e.span())),
        };
        Ok(Self {
            name,
            text,
            value,
            spans,
        })
    }

    /// Reads and parses the file at `path` (named by its path in errors).
    pub fn read(path: impl AsRef<Path>) -> Result<Self, FileErrors> {
        let path = path.as_ref();
        let name = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(name, text),
            Err(e) => Err(FileErrors {
                file: name,
                errors: vec![LocatedError {
                    error: ConfigError::new("", None, format!("cannot read the file: {e}")),
                    location: None,
                }],
            }),
        }
    }

    /// The file's name, as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole document as a JSON value (a table).
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// A top-level section, when present.
    pub fn section(&self, key: &str) -> Option<&Value> {
        self.value.get(key)
    }

    /// Where `path` (`middleware[2].max_steps`) is in the file: the value
    /// when the key is present, else the nearest enclosing table or key found.
    ///
    /// A table with no text of its own (`oops` of a `[oops.deeper]` header,
    /// or of a dotted key `oops.deeper = 1`) is found at its key, else at the
    /// first thing inside it.
    pub fn locate(&self, path: &str) -> Option<Location> {
        let mut node = &self.spans;
        let mut span = None;
        for segment in segments(path) {
            let Some((next, key_span)) = node.child(segment) else {
                break;
            };
            node = next;
            span = node.at.or(key_span).or_else(|| node.first_span()).or(span);
        }
        span.map(|s| location_of(&self.text, s))
    }

    /// `errors`, each with its location in this file (the start of the file
    /// for an error about the whole document).
    pub fn locate_errors(&self, errors: ConfigErrors) -> FileErrors {
        FileErrors {
            file: self.name.clone(),
            errors: errors
                .into_iter()
                .map(|error| LocatedError {
                    location: Some(self.locate(&error.path).unwrap_or(START)),
                    error,
                })
                .collect(),
        }
    }

    /// An error for every top-level key that is not one of `sections`, with a
    /// suggestion for the nearest.
    pub fn unknown_sections(&self, sections: &[&str]) -> ConfigErrors {
        let mut errors = ConfigErrors::new();
        if let Some(map) = self.value.as_object() {
            for (key, v) in map.iter().filter(|(k, _)| !sections.contains(&k.as_str())) {
                errors.push(ConfigError::new(
                    key.clone(),
                    Some(v.clone()),
                    format!(
                        "unknown section; the sections of an agent file are {}{}",
                        list(sections.iter().copied()),
                        did_you_mean(key, sections.iter().copied())
                    ),
                ));
            }
        }
        errors
    }
}

impl<S, C> MiddlewareRegistry<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// Builds the stack an agent file describes (see [`ConfigFile`] for the
    /// format and [`build_stack`](Self::build_stack)): every error of the file, each
    /// with its line and column, and no stack unless there are none.
    ///
    /// ```
    /// use tinyagents::config::{ConfigFile, MiddlewareRegistry};
    ///
    /// let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    /// let text = "[[middleware]]\ntype = \"loging\"\n\n[[middleware]]\ntype = \"logging\"\nlevel = \"loud\"\n";
    /// let err = registry.build_file(&ConfigFile::parse("agent.toml", text).unwrap()).unwrap_err();
    /// assert_eq!(err.len(), 2);
    /// let shown = err.to_string();
    /// assert!(shown.contains("agent.toml:2:8: `middleware[0].type` = \"loging\": unknown middleware type"));
    /// assert!(shown.contains("did you mean `logging`?"));
    /// assert!(shown.contains("agent.toml:6:9: `middleware[1].level` = \"loud\""));
    /// ```
    pub fn build_file(&self, file: &ConfigFile) -> Result<MiddlewareStack<S, C>, FileErrors> {
        let mut errors = file.unknown_sections(&FILE_SECTIONS);
        if let Err(e) = crate::store::StoreUrl::of_section(file.section("store")) {
            errors.extend(e);
        }
        match self.build_stack(file.value()) {
            Ok(stack) if errors.is_empty() => return Ok(stack),
            Ok(_) => {}
            Err(e) => errors.extend(e),
        }
        Err(file.locate_errors(errors))
    }

    /// Reads the file at `path` and [builds](Self::build_file) its stack.
    pub fn stack_from_file(&self, path: impl AsRef<Path>) -> Result<MiddlewareStack<S, C>, FileErrors> {
        self.build_file(&ConfigFile::read(path)?)
    }
}

#[derive(Clone, Copy)]
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// `a.b[2].c` → `a`, `b`, `2`, `c`.
fn segments(path: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Segment::Key(key));
        }
        while let Some(end) = rest.find(']') {
            if let Ok(i) = rest[1..end].parse() {
                out.push(Segment::Index(i));
            }
            rest = &rest[end + 1..];
        }
    }
    out
}

/// Where one value of the file is written, and its children's places: the
/// byte offsets kept from the parse (the syntax tree itself borrows the text).
#[derive(Debug, Default)]
struct SpanNode {
    /// Where the value starts, when it has text of its own (an implicit table
    /// such as `a` of `[a.b]` has none).
    at: Option<usize>,
    /// A table's keys: where each key is written, and its value.
    keys: BTreeMap<String, (Option<usize>, SpanNode)>,
    /// An array's items.
    items: Vec<SpanNode>,
}

impl SpanNode {
    fn of_table(table: &DeTable<'_>, at: Option<usize>) -> Self {
        Self {
            at,
            keys: table
                .iter()
                .map(|(k, v)| (k.get_ref().to_string(), (non_empty(k), Self::of(v))))
                .collect(),
            items: Vec::new(),
        }
    }

    fn of(value: &Spanned<DeValue<'_>>) -> Self {
        let at = non_empty(value);
        match value.get_ref() {
            DeValue::Table(t) => Self::of_table(t, at),
            DeValue::Array(a) => Self {
                at,
                keys: BTreeMap::new(),
                items: a.iter().map(Self::of).collect(),
            },
            _ => Self { at, ..Self::default() },
        }
    }

    /// The child at `segment`, and where its key is written (when it is).
    fn child(&self, segment: Segment<'_>) -> Option<(&SpanNode, Option<usize>)> {
        match segment {
            Segment::Key(k) => self.keys.get(k).map(|(key, node)| (node, *key)),
            Segment::Index(i) => self.items.get(i).map(|node| (node, None)),
        }
    }

    /// The earliest place written inside it (for a table with no text of
    /// its own: an implicit table, an array of tables).
    fn first_span(&self) -> Option<usize> {
        self.keys
            .values()
            .filter_map(|(key, node)| [node.at, *key, node.first_span()].into_iter().flatten().min())
            .chain(self.items.iter().filter_map(|n| n.at.or_else(|| n.first_span())))
            .chain(self.at)
            .min()
    }
}

/// The start of a span, unless the parser gave it no text (an implicit table).
fn non_empty<T>(spanned: &Spanned<T>) -> Option<usize> {
    let span = spanned.span();
    (span.start < span.end).then_some(span.start)
}

/// The start of a file: where an error about the whole document points.
const START: Location = Location { line: 1, column: 1 };

/// The 1-based line and column of byte `offset` in `text`.
fn location_of(text: &str, offset: usize) -> Location {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Location {
        line,
        column: before[line_start..].chars().count() + 1,
    }
}
