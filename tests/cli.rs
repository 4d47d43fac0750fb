//! CLI tests: exit codes and diagnostics of the real binary (trycmd).

#[test]
fn cli() {
    trycmd::TestCases::new()
        .register_bin("trainc", trycmd::cargo::cargo_bin!("trainc"))
        .env(
            "TRAINC_CACHE_DIR",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/cache"),
        )
        .case("tests/cmd/*.trycmd")
        .case("tests/cmd/*.toml");
}
