//! The embedded default policy, converted once at build time from its TOML source
//! (`src/default-policy.toml`) to JSON in `OUT_DIR`: every `tyba` process loads it, and serde's
//! JSON reader takes about a quarter of the time of the TOML parser on it
//! (docs/performance-run.md, run 15). The TOML file stays the source people read
//! (`tyba policy default`); the test suite checks that both give the same `PolicyFile`
//! (`Policy::check_embedded_default`).

use std::path::PathBuf;

fn main() -> Result<(), String> {
    let src = "src/default-policy.toml";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-changed=build.rs");
    let text = std::fs::read_to_string(src).map_err(|e| format!("cannot read {src}: {e}"))?;
    let value: toml::Value =
        toml::from_str(&text).map_err(|e| format!("{src} is not valid TOML: {e}"))?;
    let json = serde_json::to_string(&value)
        .map_err(|e| format!("{src} cannot be written as JSON: {e}"))?;
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("cargo sets no OUT_DIR")?)
        .join("default-policy.json");
    std::fs::write(&out, json).map_err(|e| format!("cannot write {}: {e}", out.display()))
}
