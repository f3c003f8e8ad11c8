//! Call limits and budget built-ins: see the table in [the library docs](super).
//!
//! * [`ModelCallLimitMiddleware`] — model calls per run and per thread.
//! * [`ToolCallLimitMiddleware`] — tool calls per run and per thread, per tool or all.
//! * [`LimitsMiddleware`] — `max_steps`, `max_turns` and `max_price_usd` per
//!   execution cycle, with [`PriceBudget`], [`TokenRates`] and the
//!   built-in [`PRICE_TABLE`].

mod budget;
mod counts;
#[allow(clippy::module_inception)]
mod limits;
mod model_call_limit;
mod tool_call_limit;

/// Model prices (they live in [`crate::harness::model`]: the event view prices usage with them too).
pub use crate::harness::model::{catalog_rates, TokenRates, Valuation, PRICE_TABLE};
pub use budget::{AccountingJournal, AttemptTicket, BillingClass, BudgetSnapshot, Charge, PriceBudget};
pub use counts::{ExitBehavior, ModelExitBehavior};
pub use limits::{LimitsConfig, LimitsMiddleware};
pub use model_call_limit::{ModelCallLimitConfig, ModelCallLimitMiddleware};
pub use tool_call_limit::{ToolCallLimitConfig, ToolCallLimitMiddleware};

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<ModelCallLimitMiddleware>(),
    doc_of::<ToolCallLimitMiddleware>(),
    doc_of::<LimitsMiddleware>(),
];
