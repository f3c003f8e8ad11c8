//! The prepared tool-call batch reviewed by `on_tool_batch` hooks (the calls
//! as the model made them) and `on_prepared_tool_calls` hooks (the calls with
//! their final effective arguments, after every `before_tool`).

use std::sync::Arc;

use serde_json::Value;

use super::{FileAccess, ToolCall, ToolResult};

/// Declares the file access of a call from its effective arguments (the
/// agent passes its tools' [`Tool::file_access`](crate::harness::tool::Tool::file_access)).
pub type AccessFn = Arc<dyn Fn(&ToolCall) -> Vec<FileAccess> + Send + Sync>;

/// The verdict on one prepared call.
#[derive(Debug, Clone, PartialEq)]
pub enum PreparedCallVerdict {
    /// Run it.
    Proceed,
    /// Do not run it; this is its one final result.
    Reject(ToolResult),
}

/// One call of a batch, with its effective arguments and the file access
/// declared for them.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedToolCall {
    /// The call, with its effective arguments.
    pub call: ToolCall,
    /// The files the call declares it will touch.
    pub access: Vec<FileAccess>,
    verdict: PreparedCallVerdict,
}

impl PreparedToolCall {
    /// A prepared call that will proceed.
    pub fn new(call: ToolCall, access: Vec<FileAccess>) -> Self {
        Self {
            call,
            access,
            verdict: PreparedCallVerdict::Proceed,
        }
    }

    /// The verdict so far.
    pub fn verdict(&self) -> &PreparedCallVerdict {
        &self.verdict
    }
}

/// Every tool call of one model reply, reviewed as a whole before any runs.
///
/// Each call has exactly one verdict (structurally: no method adds, removes or
/// renames a call), so every call still gets exactly one result. A review
/// that hands back another batch than the one it was given (`*batch =
/// PreparedBatch::new(…)`) fails the run: the agent loop knows its batch by
/// a tag that a batch made anew does not carry.
///
/// A review that rewrites a call's arguments (a permission hook's updated
/// input, a person's edit) does it with [`set_arguments`](Self::set_arguments):
/// the call's declared file access is then recomputed from the new effective
/// arguments, so the reviews after it see the call as it goes on. In
/// `on_prepared_tool_calls` that access is the one the scheduler orders the
/// calls by.
#[derive(Clone, Default, educe::Educe)]
#[educe(Debug)]
pub struct PreparedBatch {
    calls: Vec<PreparedToolCall>,
    #[educe(Debug(ignore))]
    access: Option<AccessFn>,
    /// Whether [`set_arguments`](Self::set_arguments) was called.
    rewritten: bool,
    /// Which batch this is: fresh for each one made, shared by its clones.
    /// No method adds, removes or renames a call, so a batch with the tag
    /// the agent loop gave it holds the model's calls, in order.
    #[educe(Debug(ignore))]
    tag: u64,
}

/// The next batch's [`PreparedBatch::tag`] (0 is `Default`'s).
static NEXT_TAG: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn fresh_tag() -> u64 {
    NEXT_TAG.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl PartialEq for PreparedBatch {
    fn eq(&self, other: &Self) -> bool {
        self.calls == other.calls
    }
}

impl PreparedBatch {
    /// A batch of prepared calls.
    pub fn new(calls: Vec<PreparedToolCall>) -> Self {
        Self {
            calls,
            access: None,
            rewritten: false,
            tag: fresh_tag(),
        }
    }

    /// A batch whose calls' file access is derived by `access` from their
    /// effective arguments, now and after every [`set_arguments`](Self::set_arguments).
    pub fn with_access(calls: Vec<ToolCall>, access: AccessFn) -> Self {
        let calls = calls
            .into_iter()
            .map(|call| {
                let declared = access(&call);
                PreparedToolCall::new(call, declared)
            })
            .collect();
        Self {
            calls,
            access: Some(access),
            rewritten: false,
            tag: fresh_tag(),
        }
    }

    /// Replaces the effective arguments of call `index` (and, when the batch
    /// knows how, recomputes the call's declared file access from them).
    ///
    /// In `on_tool_batch` only: the `before_tool` guards then judge the new
    /// arguments. A rewrite in `on_prepared_tool_calls`, after every
    /// `before_tool`, would run unjudged, so the agent loop fails the run
    /// there (reject the call instead).
    ///
    /// # Panics
    /// If `index` is out of range.
    pub fn set_arguments(&mut self, index: usize, arguments: Value) {
        self.rewritten = true;
        let p = &mut self.calls[index];
        p.call.arguments = arguments;
        if let Some(access) = &self.access {
            p.access = access(&p.call);
        }
    }

    /// The declared file access of a call with these arguments, as the
    /// scheduler computes it (`None` for a batch made without an access
    /// function): how a review judges a call's arguments as rewritten later
    /// (by `before_tool`).
    pub fn access_fn(&self) -> Option<AccessFn> {
        self.access.clone()
    }

    /// The calls, in the model's order.
    pub fn calls(&self) -> &[PreparedToolCall] {
        &self.calls
    }

    /// How many calls.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Rejects call `index` with an error result built from `message`.
    ///
    /// # Panics
    /// If `index` is out of range.
    pub fn reject(&mut self, index: usize, message: impl Into<String>) {
        let p = &mut self.calls[index];
        p.verdict = PreparedCallVerdict::Reject(ToolResult::error(&p.call, message));
    }

    /// Rejects call `index` with a given result. The result answers that
    /// call: its `call_id` and `name` are set to the call's, whatever they
    /// were (a result with another id would leave the call unanswered).
    ///
    /// # Panics
    /// If `index` is out of range.
    pub fn reject_with(&mut self, index: usize, mut result: ToolResult) {
        let p = &mut self.calls[index];
        result.call_id.clone_from(&p.call.id);
        result.name.clone_from(&p.call.name);
        p.verdict = PreparedCallVerdict::Reject(result);
    }

    /// Whether a review rewrote a call's arguments ([`set_arguments`](Self::set_arguments)).
    pub fn rewritten(&self) -> bool {
        self.rewritten
    }

    /// Which batch this is (its clones share it; a batch made anew has
    /// another): the agent loop checks that a review handed back the batch
    /// it was given, not one made to replace it.
    pub(crate) fn tag(&self) -> u64 {
        self.tag
    }

    /// The calls with their verdicts, consuming the batch.
    pub fn into_calls(self) -> Vec<PreparedToolCall> {
        self.calls
    }
}

impl PreparedToolCall {
    /// The call and its verdict.
    pub fn into_parts(self) -> (ToolCall, PreparedCallVerdict) {
        (self.call, self.verdict)
    }
}
