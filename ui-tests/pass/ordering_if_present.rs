//! `before_if_present` / `after_if_present`: optional ordering constraints,
//! by name or by DSL type, on a free fn and on a `#[middleware]` block; they
//! reach the generated metadata, and a stack without the named middleware
//! still accepts them.

use tinyagents::prelude::*;

#[before_model(name = "log")]
fn log(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

#[before_model(name = "span", before_if_present = [Log, "retry"], after_if_present = ["auth"])]
fn span(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

struct Audit;

#[middleware(after_if_present = ["span"], before = ["log"])]
impl Audit {
    #[after_model]
    fn audit(&self, response: &mut ModelResponse) -> Result<()> {
        let _ = response;
        Ok(())
    }
}

fn main() {
    let info = <Span as Middleware<()>>::info(&Span);
    assert_eq!(info.before_if_present, ["log", "retry"]);
    assert_eq!(info.after_if_present, ["auth"]);
    assert!(info.before.is_empty() && info.after.is_empty());

    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.add(Log).unwrap();
    stack.add(Span).unwrap();
    stack.add(Audit).unwrap();
    // span moves before log; audit must precede log and follow span
    assert_eq!(stack.names(), ["span", "Audit", "log"]);
}
