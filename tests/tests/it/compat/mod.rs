//! Compatibility layers: other frameworks' APIs over tinyagents.

mod querymt_behaviour;
mod querymt_examples;
