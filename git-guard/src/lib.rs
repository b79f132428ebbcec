//! # tyba-git-guard
//!
//! Resolves what a `git push` would update and refuses protected refs.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
