//! Strict JSON reader and deterministic writer (under construction).
