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
