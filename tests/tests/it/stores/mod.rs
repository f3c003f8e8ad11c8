//! The shared stores (SQLite, PostgreSQL, Redis): configuration, secrets, spend when a store fails.
//!
//! `sql` and `redis` are compiled with the `sqlite`/`postgres` and `redis`
//! features (their servers named by TINYAGENTS_POSTGRES_URL and
//! TINYAGENTS_REDIS_URL); `store_processes` is a binary of its own (it
//! re-executes itself as worker processes). `support` holds what they share.

mod budget_outage;
mod config;
mod redis;
mod secrets;
mod sql;
mod support;
