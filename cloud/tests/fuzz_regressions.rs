//! Inputs the fuzz targets (fuzz/, docs/testing.md "Fuzzing") found to break
//! a property, kept under tests/data/fuzz/<target>/.

use std::path::PathBuf;

use cloud_access::go_duration;

fn input(target: &str, name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/fuzz")
        .join(target)
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `.000…0001954644088s` (55 fraction digits): the fraction's scale passed
/// u128 and the parse overflowed (a panic in debug builds, a wrong duration
/// in release ones). Go keeps the scale as a float64: the fraction is too
/// small to count, the duration is 0.
#[test]
fn a_fraction_with_more_digits_than_an_integer_holds() {
    let text = input("go_duration", "fraction-past-u128.txt");
    assert_eq!(go_duration::parse(&text), Ok(0));
    // The same digits after one second: Go's answer is exactly 1s.
    let one_more = format!("1{text}");
    assert_eq!(go_duration::parse(&one_more), Ok(1_000_000_000));
}
