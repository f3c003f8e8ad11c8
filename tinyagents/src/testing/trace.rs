//! One short readable line per event, to assert on a run's sequence.

use crate::harness::event::{AgentEvent, HookOutcome};
use crate::harness::model::DeltaContent;

/// One short line per event, for asserting on sequences:
/// `started NAME.HOOK`, `completed NAME.HOOK ok|error:KIND|panicked|cancelled`,
/// `model_call step=N attempt=N`, `delta "TEXT"`, `tool_call NAME`, `tool_done NAME [error]`,
/// `control KIND`, `suppressed NAME`, `notice SOURCE: MESSAGE`, `run_started`, `run_completed [error:KIND]`, …
pub fn trace(events: &[AgentEvent]) -> Vec<String> {
    events.iter().filter_map(trace_line).collect()
}

/// The [`trace`] line of one event (`None` for kinds it does not describe).
pub fn trace_line(event: &AgentEvent) -> Option<String> {
    Some(match event {
        AgentEvent::RunStarted { depth, .. } if *depth > 0 => format!("run_started depth={depth}"),
        AgentEvent::RunStarted { .. } => "run_started".to_owned(),
        AgentEvent::RunCompleted { error: None, .. } => "run_completed".to_owned(),
        AgentEvent::RunCompleted { error: Some(k), .. } => format!("run_completed error:{k}"),
        AgentEvent::MiddlewareStarted { middleware, hook, .. } => format!("started {middleware}.{hook}"),
        AgentEvent::MiddlewareCompleted {
            middleware,
            hook,
            outcome,
            ..
        } => {
            let outcome = match outcome {
                HookOutcome::Ok => "ok".to_owned(),
                HookOutcome::Error(k) => format!("error:{k}"),
                HookOutcome::Panicked => "panicked".to_owned(),
                HookOutcome::Cancelled => "cancelled".to_owned(),
            };
            format!("completed {middleware}.{hook} {outcome}")
        }
        AgentEvent::ModelCallStarted { step, attempt, .. } => format!("model_call step={step} attempt={attempt}"),
        AgentEvent::ModelRequest { request, .. } => {
            format!("model_request kept={} new={}", request.kept, request.messages.len())
        }
        AgentEvent::ModelCallCompleted { error: Some(k), .. } => format!("model_done error:{k}"),
        AgentEvent::ModelCallCompleted { .. } => "model_done".to_owned(),
        AgentEvent::ModelDelta { delta, .. } => match &delta.content {
            DeltaContent::Text { text } => format!("delta {text:?}"),
            DeltaContent::Reasoning { text } => format!("reasoning {text:?}"),
            DeltaContent::ToolCall { arguments, .. } => format!("tool_call_delta {arguments:?}"),
            DeltaContent::Usage { .. } => "usage".to_owned(),
            DeltaContent::Finish { reason } => format!("finish {reason:?}"),
        },
        AgentEvent::AttemptDiscarded { attempt, .. } => format!("discarded attempt={attempt}"),
        AgentEvent::DeltaSuppressed { middleware, .. } => format!("suppressed {middleware}"),
        AgentEvent::ToolCallStarted { tool, .. } => format!("tool_call {tool}"),
        AgentEvent::ToolCallRefused { tool, .. } => format!("tool_refused {tool}"),
        AgentEvent::ToolDelta { delta, .. } => format!("tool_delta {:?}", delta.content),
        AgentEvent::ToolCallCompleted {
            tool, is_error: false, ..
        } => format!("tool_done {tool}"),
        AgentEvent::ToolCallCompleted {
            tool, is_error: true, ..
        } => format!("tool_done {tool} error"),
        AgentEvent::ControlApplied { control, .. } => format!("control {control}"),
        AgentEvent::StateUpdated { key, .. } => format!("state {key}"),
        AgentEvent::Steering {
            command_id,
            action,
            decision,
            transformed,
            ..
        } => {
            format!(
                "steering {command_id} {action} {decision}{}",
                if *transformed { " transformed" } else { "" }
            )
        }
        AgentEvent::ToolsFiltered { by, excluded, .. } => format!("tools_filtered {by} -{}", excluded.join(",")),
        AgentEvent::Notice { source, message, .. } => format!("notice {source}: {message}"),
        AgentEvent::Compressed { provenance, .. } => format!(
            "compressed {} {} messages {}->{} tokens",
            provenance.middleware,
            provenance.source_message_ids.len(),
            provenance.original_tokens,
            provenance.compressed_tokens
        ),
        AgentEvent::CacheLayoutChanged { event, .. } => {
            format!("cache_layout step={} by={}", event.step, event.changed_by.join(","))
        }
        AgentEvent::OutputLimitRecovery {
            action,
            attempt,
            cap_before,
            cap_after,
            ..
        } => format!("output_limit_recovery {action} attempt={attempt} cap={cap_before}->{cap_after}"),
        AgentEvent::Custom { middleware, name, .. } => format!("custom {middleware}.{name}"),
        AgentEvent::Retry {
            target,
            attempt,
            max_attempts,
            delay,
            error,
            ..
        } => format!("retry {target} attempt={attempt}/{max_attempts} delay={delay:?} error:{error}"),
        AgentEvent::Fallback { from, to, error, .. } => format!("fallback {from} -> {to} error:{error}"),
        AgentEvent::RateLimited {
            key, rejected: true, ..
        } => format!("rate_limited {key} rejected"),
        AgentEvent::RateLimited { key, waited, .. } => format!("rate_limited {key} waited={waited:?}"),
    })
}
