//! Rendering tokens as the text a person would have written (`Option<u32>`,
//! `1..=10`, `&'static str`), for error messages and the documentation table.
//! Deterministic: it never depends on the compiler's own pretty-printer.

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// `tokens` as source text with conventional spacing.
pub(crate) fn tokens_to_string(tokens: TokenStream) -> String {
    let mut out = String::new();
    write(&mut out, tokens);
    out
}

/// What was printed last.
enum Last {
    Nothing,
    Word,
    /// A complete operator (`::`, `..=`, `,`, `&`).
    Op(String),
    Group,
}

/// Operators after which no space follows.
const TIGHT_AFTER: &[&str] = &["::", "..", "..=", ".", "&", "<", "-", "!", "#", "'", "$"];
/// Characters before which no space goes.
const TIGHT_BEFORE: &[char] = &[',', ';', '.', ':', '<', '>', '?', '!'];

fn write(out: &mut String, tokens: TokenStream) {
    let mut last = Last::Nothing;
    let mut op = String::new(); // the operator being read (joint punctuation)
    for tt in tokens {
        let in_op = !op.is_empty();
        if !in_op {
            let space = match (&last, &tt) {
                (Last::Nothing, _) => false,
                (Last::Op(o), _) if TIGHT_AFTER.contains(&o.as_str()) => false,
                (_, TokenTree::Punct(p)) if TIGHT_BEFORE.contains(&p.as_char()) => false,
                (Last::Op(o), TokenTree::Group(_) | TokenTree::Punct(_)) if o == ">" => false,
                (Last::Word, TokenTree::Group(g)) => {
                    !matches!(g.delimiter(), Delimiter::Parenthesis | Delimiter::Bracket)
                }
                _ => true,
            };
            if space {
                out.push(' ');
            }
        }
        match tt {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{ ", " }"),
                    Delimiter::None => ("", ""),
                };
                out.push_str(open);
                write(out, g.stream());
                out.push_str(close);
                last = Last::Group;
            }
            TokenTree::Punct(p) => {
                out.push(p.as_char());
                op.push(p.as_char());
                if p.spacing() == Spacing::Alone || p.as_char() == '\'' {
                    if p.as_char() != '\'' {
                        last = Last::Op(std::mem::take(&mut op));
                    }
                } else {
                    continue;
                }
            }
            TokenTree::Ident(i) => {
                out.push_str(&i.to_string());
                op.clear();
                last = Last::Word;
            }
            TokenTree::Literal(l) => {
                out.push_str(&l.to_string());
                op.clear();
                last = Last::Word;
            }
        }
    }
}
