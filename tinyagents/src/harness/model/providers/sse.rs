//! A server-sent events parser: bytes in (split anywhere), events out.
//!
//! It follows the event-stream format: lines end with `\n`, `\r\n` or `\r`; a
//! blank line dispatches the event; `data:` lines join with `\n`; lines that
//! start with `:` are comments; one space after the colon is dropped. Lines
//! are split at the byte level and decoded only when whole, so a multi-byte
//! character cut between two network reads is reassembled.

use std::collections::VecDeque;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SseEvent {
    /// The `event:` field (empty when the server sent none).
    pub event: String,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
}

/// Why the byte stream is not a valid event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseError {
    /// A line is not UTF-8.
    Utf8,
    /// An event grew past the size limit.
    TooLarge(usize),
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Utf8 => f.write_str("an event-stream line is not valid UTF-8"),
            Self::TooLarge(limit) => write!(f, "an event is larger than {limit} bytes"),
        }
    }
}

/// The incremental parser.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// The largest event accepted, and so the longest line: a server that
    /// never ends a line is refused after this many bytes (a guard against a
    /// runaway or hostile server).
    pub(crate) const MAX_EVENT: usize = 4 * 1024 * 1024;

    /// A parser at the start of a stream.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; complete events are appended to `out`.
    pub(crate) fn push(&mut self, mut bytes: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), SseError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.after_cr {
            // `\r\n` split across two reads: the `\n` ends nothing new.
            if let [b'\n', rest @ ..] = bytes {
                bytes = rest;
            }
            self.after_cr = false;
        }
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.extend_line(&bytes[..end])?;
            let cr = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            self.end_line(out)?;
        }
        self.extend_line(bytes)
    }

    /// Whether bytes or fields of an unfinished event are buffered (the
    /// stream ended mid-event when this is true at its end).
    #[cfg(test)]
    pub(crate) fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }

    /// Bytes held for the unfinished line and event (at most [`Self::MAX_EVENT`]).
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.line.len() + self.data.len() + self.event.len()
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + self.data.len() + self.event.len() + bytes.len() > Self::MAX_EVENT {
            return Err(SseError::TooLarge(Self::MAX_EVENT));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, out: &mut VecDeque<SseEvent>) -> Result<(), SseError> {
        if self.line.is_empty() {
            if self.has_data {
                if self.data.ends_with('\n') {
                    self.data.pop();
                }
                out.push_back(SseEvent {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                });
                self.has_data = false;
            } else {
                self.event.clear();
            }
            return Ok(());
        }
        let line = std::mem::take(&mut self.line);
        let line = std::str::from_utf8(&line).map_err(|_| SseError::Utf8)?;
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => value.clone_into(&mut self.event),
            // `id` and `retry` matter for reconnecting, which a model call never does.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = VecDeque::new();
        for chunk in input.chunks(piece) {
            p.push(chunk, &mut out).unwrap();
        }
        assert!(!p.has_partial());
        out.into()
    }

    #[test]
    fn events_survive_any_split_and_any_line_ending() {
        let input = "event: a\ndata: {\"x\":\"h\u{e9}llo \u{1f30d}\"}\n\n: keep-alive\n\r\nevent:b\r\ndata:1\r\ndata:  2\r\n\r\ndata: [DONE]\r\r";
        let want = vec![
            SseEvent {
                event: "a".into(),
                data: "{\"x\":\"h\u{e9}llo \u{1f30d}\"}".into(),
            },
            SseEvent {
                event: "b".into(),
                data: "1\n 2".into(),
            },
            SseEvent {
                event: String::new(),
                data: "[DONE]".into(),
            },
        ];
        for piece in 1..=input.len() {
            assert_eq!(parse_in_pieces(input.as_bytes(), piece), want, "piece size {piece}");
        }
    }

    #[test]
    fn an_unfinished_event_is_reported_as_partial() {
        let mut p = SseParser::new();
        let mut out = VecDeque::new();
        p.push(b"data: {\"a\":", &mut out).unwrap();
        assert!(out.is_empty() && p.has_partial());
        p.push(b"1}\n", &mut out).unwrap();
        assert!(out.is_empty() && p.has_partial());
        p.push(b"\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert!(!p.has_partial());
    }

    #[test]
    fn invalid_utf8_is_an_error_not_a_panic() {
        let mut p = SseParser::new();
        let mut out = VecDeque::new();
        assert_eq!(p.push(b"data: \xff\xfe\n\n", &mut out), Err(SseError::Utf8));
    }
}
