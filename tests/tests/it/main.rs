//! The behaviour tests of tinyagents, through its public API only, in one
//! test binary: one link instead of one per file (the suite built in a
//! fraction of the time on two cores). Each module is one concern; the
//! support modules are shared.
//!
//! Five suites stay their own binaries because they need the whole process:
//! `alloc_idle_hooks` and `hooks_isolation` install a counting global
//! allocator (and the latter plants environment variables), `approval_restart`,
//! `checkpoint_crash` and `store_processes` re-execute themselves as child
//! processes.

mod capture;
#[cfg(feature = "providers")]
mod provider_support;
mod sandbox_support;

mod agent_loop;
mod approval_binding;
mod approvals_redteam;
mod argument_limits;
mod budget_outage;
mod builtin_agent_mode;
mod builtin_context_clipping;
mod builtin_context_editing;
mod builtin_context_window;
mod builtin_contextual_tool_selection;
mod builtin_dedup_check;
mod builtin_defaults_acceptance;
mod builtin_delta_compression;
mod builtin_dynamic_prompt;
mod builtin_dynamic_tool_selection;
mod builtin_human_in_the_loop;
mod builtin_limits;
mod builtin_logging;
mod builtin_message_trim;
mod builtin_model_call_limit;
mod builtin_model_fallback;
mod builtin_model_retry;
mod builtin_names_defaults;
mod builtin_output_compression;
mod builtin_output_limit_recovery;
mod builtin_parallel_edit_guard;
mod builtin_pii;
mod builtin_pii_corpus;
mod builtin_pii_hostile;
mod builtin_pii_keyed;
mod builtin_pii_scan;
mod builtin_pii_streams;
mod builtin_prompt_cache_guard;
mod builtin_rate_limiter;
mod builtin_retrieval_compression;
mod builtin_shell_fs_guard;
mod builtin_structured_output;
mod builtin_summarization;
mod builtin_timeout;
mod builtin_tool_allowlist;
mod builtin_tool_call_limit;
mod builtin_tool_policy;
mod builtin_tool_retry;
mod builtin_tracing;
mod builtin_transcript_compression;
mod builtin_usage_accounting;
mod checkpoint_integrity;
mod checkpoint_resume;
mod concurrency;
mod config_file;
mod config_file_bounds;
mod conflict_errors;
mod control;
mod default_middleware;
mod deltas;
mod dsl_config;
mod dsl_diagnostics;
mod dsl_docs;
mod dsl_hooks;
mod dsl_middleware;
mod effective_access;
mod errors_and_events;
mod events_json;
mod external_hooks;
mod graph;
mod graph_boundary;
mod guard_corpus;
mod guard_escapes;
mod guard_escapes_fifth;
mod guard_escapes_third;
mod guard_one_parse;
mod guard_one_parse_attacks;
mod guards_redteam;
mod hook_order;
mod hooks_fail_closed;
mod hooks_sandboxed;
mod legacy_context_keys;
mod loop_limits;
mod loop_promises;
mod loop_promises_redteam;
mod loop_properties;
mod middleware_tools;
mod names;
mod ordering;
mod ordering_displacement;
mod otel_span_names;
mod patch_tool;
mod policy_inheritance;
mod protected_table;
mod provider_anthropic;
mod provider_bounds;
mod provider_client;
mod provider_fakellm;
mod provider_openai;
mod provider_secrets;
mod provider_stack;
mod provider_typed;
mod retries_redteam;
mod retry_builders;
mod sandbox_commands;
mod sandbox_escapes;
mod sandbox_protected;
mod spend_tree;
mod steering;
mod sync_dispatch;
// The shared stores: `store_sql` and `store_redis` are compiled with the
// `sqlite`/`postgres` and `redis` features (their servers named by
// TINYAGENTS_POSTGRES_URL and TINYAGENTS_REDIS_URL); `store_processes` is a
// binary of its own (it re-executes itself as worker processes).
mod store_config;
mod store_redis;
mod store_secrets;
mod store_sql;
mod tokens_exact;
mod tracing_capture;
mod typed_outputs;
mod typed_tools;
mod wraps;
