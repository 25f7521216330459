//! Numbers as JSON text, shared by the renderers that build JSON by hand (focus, maps, HTML).

/// An f32 as the JSON document writes every step value.
pub fn f32_json(x: f32) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = super::json::write_f32(&mut out, x, &mut zmij::Buffer::new());
    String::from_utf8_lossy(&out).into_owned()
}

/// An f64 as JSON: shortest round-trip decimal, or the documented strings for non-finite.
pub fn f64_json(x: f64) -> String {
    if x.is_nan() {
        "\"nan\"".into()
    } else if x.is_infinite() {
        (if x > 0.0 { "\"inf\"" } else { "\"-inf\"" }).into()
    } else {
        zmij::Buffer::new().format_finite(x).to_string()
    }
}

/// A number for a table cell at `p` decimals, as PyTorch prints it; `nan`, `inf`, `-inf` as
/// words; and in scientific notation from 1e15 up, where fixed notation would print a column
/// wider than a terminal (3e37 at 12 decimals is 51 characters).
pub fn fixed(x: f64, p: usize) -> String {
    if x.is_nan() {
        "nan".to_string()
    } else if x.is_infinite() {
        (if x > 0.0 { "inf" } else { "-inf" }).to_string()
    } else if x.abs() >= 1e15 {
        format!("{x:.p$e}")
    } else {
        format!("{x:.p$}")
    }
}
