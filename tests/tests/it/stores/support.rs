//! What the store tests share: the limits that charge a shared budget.

use tinyagents::middleware::{LimitsMiddleware, TokenRates};
use tinyagents::store::SharedBudget;

/// `limits` charging `budget` $30 per million input tokens (output free),
/// so a call's price is its input tokens alone.
pub fn charging_input(budget: SharedBudget) -> LimitsMiddleware {
    LimitsMiddleware::new()
        .manual_rates(TokenRates {
            input: Some(30.0),
            output: Some(0.0),
            ..TokenRates::default()
        })
        .unwrap()
        .shared_budget(budget)
}
