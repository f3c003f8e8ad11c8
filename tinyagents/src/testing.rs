//! Testing kit: how to test your own middleware with fake models, tools and sinks.
