//! Compatibility layers: other agent frameworks' public APIs, written over
//! tinyagents' own types so their code runs in a native stack unchanged.
//!
//! | module | brings across |
//! | --- | --- |
//! | [`querymt`] | QueryMT Agent's middleware API: `MiddlewareDriver`, `CompositeDriver`, `MiddlewareFactory`, `MIDDLEWARE_REGISTRY` |

pub mod querymt;
