//! The limits on a tool call's arguments: how deep and how large they may
//! be, declared once and checked where arguments enter the runtime (a
//! model's reply, a person's edit).
//!
//! Every checkpoint store reads its records back with `serde_json`, whose
//! parser refuses documents nested more than 128 levels deep. A checkpoint
//! keeps a call's arguments inside its own structure (the state, the
//! conversation, the pending calls, an approval request, a sub-agent's
//! request inside its parent's), so arguments nested close to 128 levels
//! are written and then cannot be read: the thread's latest checkpoint is
//! refused, and a call paused for approval can be neither approved nor
//! rejected. [`MAX_ARGUMENT_DEPTH`] leaves the rest of those 128 levels to
//! the envelope; [`MAX_ARGUMENT_BYTES`] keeps a checkpoint holding a whole
//! batch (each call's arguments appear in it a few times) well under what
//! every store takes in one record (Redis: 512 MB per value).

use serde_json::Value;

/// The deepest a call's arguments may be nested, counting each object and
/// array as one level (`{}` is 1, `{"a": [1]}` is 2).
pub const MAX_ARGUMENT_DEPTH: usize = 64;

/// The most bytes a call's arguments may take, as JSON text.
pub const MAX_ARGUMENT_BYTES: usize = 1024 * 1024;

/// Checks arguments given as JSON text (before they are parsed: the depth
/// is counted on the text, so no parser recursion is spent on them).
///
/// # Errors
/// The limit exceeded and by how much, as a phrase to put in an error
/// that names the call.
pub fn check_argument_text(text: &str) -> Result<(), String> {
    if text.len() > MAX_ARGUMENT_BYTES {
        return Err(too_large(text.len()));
    }
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_ARGUMENT_DEPTH {
        return Err(too_deep(deepest));
    }
    Ok(())
}

/// Checks arguments given as a value (a person's edit, a hook's rewrite).
///
/// # Errors
/// As [`check_argument_text`].
pub fn check_argument_value(value: &Value) -> Result<(), String> {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Object(map) => Box::new(map.values()),
            Value::Array(items) => Box::new(items.iter()),
            _ => continue,
        };
        deepest = deepest.max(depth);
        if deepest > MAX_ARGUMENT_DEPTH {
            return Err(too_deep(deepest));
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    let len = serde_json::to_string(value).map_or(usize::MAX, |s| s.len());
    if len > MAX_ARGUMENT_BYTES {
        return Err(too_large(len));
    }
    Ok(())
}

fn too_deep(depth: usize) -> String {
    format!(
        "its arguments are nested {depth} levels deep, above the limit of {MAX_ARGUMENT_DEPTH} \
         (`MAX_ARGUMENT_DEPTH`: every checkpoint store must read them back inside a checkpoint)"
    )
}

fn too_large(bytes: usize) -> String {
    format!(
        "its arguments take {bytes} bytes of JSON, above the limit of {MAX_ARGUMENT_BYTES} \
         (`MAX_ARGUMENT_BYTES`: every checkpoint store must take them in one record)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn the_deepest_admitted_arguments_pass_and_one_level_more_is_refused() {
        assert!(check_argument_text(&nested(MAX_ARGUMENT_DEPTH)).is_ok());
        let err = check_argument_text(&nested(MAX_ARGUMENT_DEPTH + 1)).unwrap_err();
        assert!(err.contains("nested 65 levels deep"), "{err}");
        let value: Value = serde_json::from_str(&nested(MAX_ARGUMENT_DEPTH)).unwrap();
        assert!(check_argument_value(&value).is_ok());
        let value: Value = serde_json::from_str(&nested(MAX_ARGUMENT_DEPTH + 1)).unwrap();
        assert!(check_argument_value(&value).unwrap_err().contains("65 levels"));
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let text = format!(r#"{{"a": "{}\"{}"}}"#, "[".repeat(200), "{".repeat(200));
        assert!(check_argument_text(&text).is_ok());
    }

    #[test]
    fn size_is_bounded() {
        let text = format!(r#"{{"a": "{}"}}"#, "x".repeat(MAX_ARGUMENT_BYTES));
        assert!(check_argument_text(&text).unwrap_err().contains("bytes of JSON"));
        let value = serde_json::json!({"a": "x".repeat(MAX_ARGUMENT_BYTES)});
        assert!(check_argument_value(&value).unwrap_err().contains("bytes of JSON"));
    }
}
