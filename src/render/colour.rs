//! The colour scale shared by the heatmap, the SVG and the HTML page: viridis, and where a
//! weight falls on it.

/// viridis at 0, 1/8, …, 1 (R's `viridisLite::viridis(9)`); between them, linear.
pub const VIRIDIS: [[u8; 3]; 9] = [
    [0x44, 0x01, 0x54],
    [0x47, 0x2d, 0x7b],
    [0x3b, 0x52, 0x8b],
    [0x2c, 0x72, 0x8e],
    [0x21, 0x90, 0x8c],
    [0x27, 0xad, 0x81],
    [0x5d, 0xc8, 0x63],
    [0xaa, 0xdc, 0x32],
    [0xfd, 0xe7, 0x25],
];

/// The colour of `t` in [0, 1] (clamped; NaN counts as 0).
pub fn viridis(t: f64) -> [u8; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) } * 8.0;
    let i = (t.floor() as usize).min(7);
    let f = t - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    [0, 1, 2].map(|c| (a[c] as f64 + (b[c] as f64 - a[c] as f64) * f).round() as u8)
}

/// A diverging scale for signed values (ColorBrewer's RdBu, 9 classes, Harrower & Brewer
/// 2003): blue at 0 (the most negative), near-white at ½ (zero), red at 1 (the most positive).
pub const DIVERGING: [[u8; 3]; 9] = [
    [0x21, 0x66, 0xac],
    [0x43, 0x93, 0xc3],
    [0x92, 0xc5, 0xde],
    [0xd1, 0xe5, 0xf0],
    [0xf7, 0xf7, 0xf7],
    [0xfd, 0xdb, 0xc7],
    [0xf4, 0xa5, 0x82],
    [0xd6, 0x60, 0x4d],
    [0xb2, 0x18, 0x2b],
];

/// The diverging colour of `t` in [0, 1] (clamped; NaN counts as ½, zero).
pub fn diverging(t: f64) -> [u8; 3] {
    let t = if t.is_nan() { 0.5 } else { t.clamp(0.0, 1.0) } * 8.0;
    let i = (t.floor() as usize).min(7);
    let f = t - i as f64;
    let (a, b) = (DIVERGING[i], DIVERGING[i + 1]);
    [0, 1, 2].map(|c| (a[c] as f64 + (b[c] as f64 - a[c] as f64) * f).round() as u8)
}

/// A grid cell's colour: viridis from `lo` to `hi`, or diverging on a signed grid.
pub fn grid_colour(v: f32, lo: f32, hi: f32, signed: bool) -> [u8; 3] {
    let t = scale_between(v, lo, hi);
    if signed {
        diverging(if v.is_finite() { t } else { 0.5 })
    } else {
        viridis(t)
    }
}

/// `#rrggbb`.
pub fn hex(rgb: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2])
}

/// Whether dark text reads better than light text on `rgb` (WCAG relative luminance).
pub fn dark_text(rgb: [u8; 3]) -> bool {
    let lin = |c: u8| {
        let s = c as f64 / 255.0;
        if s <= 0.04045 {
            s / 12.92
        } else {
            ((s + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2]) > 0.179
}

/// The map's colour-scale position of `v`: 0 to its largest weight.
pub fn scale_of(v: f32, max: f32) -> f64 {
    if max > 0.0 && v.is_finite() {
        (v / max) as f64
    } else {
        0.0
    }
}

/// The colour-scale position of `v` on a scale from `lo` to `hi` (a patching grid's).
pub fn scale_between(v: f32, lo: f32, hi: f32) -> f64 {
    if hi > lo && v.is_finite() {
        ((v - lo) / (hi - lo)) as f64
    } else {
        0.0
    }
}

/// The largest finite value of a map.
pub fn max_of(values: &[f32]) -> f32 {
    values.iter().copied().filter(|v| v.is_finite()).fold(0.0, f32::max)
}
