//! The checks of a spec's fields that stand alone: the collection id, the optional
//! centre and variable names, and the bounds only a new collection must meet.

use crate::SpecError;
use crate::limits::{
    MAX_CENTRE_MAGNITUDE, MAX_CLIP_RADIUS, MAX_ID_LEN, MAX_NAME_BYTES, MIN_CLIP_RADIUS, MIN_DELTA,
};
use ldpcov_proto::v1::{CollectionSpec, LocalMechanism};

/// Checks a collection id: 1–128 characters from `[A-Za-z0-9._-]`.
pub fn validate_collection_id(id: &str) -> Result<(), SpecError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(SpecError::CollectionId(
            id.chars().take(MAX_ID_LEN + 8).collect(),
        ))
    }
}

/// The bounds only a new collection must meet (see [`Collection::create`](super::Collection::create)): R, δ and
/// the centre within the ranges whose derived quantities stay finite with margin,
/// printable names. Stored collections are not held to them, so none becomes
/// unreadable.
pub(super) fn validate_new_spec(spec: &CollectionSpec) -> Result<(), SpecError> {
    let out_of_range = |field: String, value: f64, range: &'static str| SpecError::OutOfRange {
        field,
        value,
        range,
    };
    // With a radius phase, its candidates stand for R (which is 0 until chosen).
    let radii = match &spec.radius_phase {
        Some(phase) => vec![
            ("radius_phase.smallest_radius", phase.smallest_radius),
            ("radius_phase.largest_radius", phase.largest_radius),
        ],
        None => vec![("clip_radius", spec.clip_radius)],
    };
    for (field, r) in radii {
        if !(MIN_CLIP_RADIUS..=MAX_CLIP_RADIUS).contains(&r) {
            return Err(out_of_range(field.into(), r, "[1e-100, 1e100]"));
        }
    }
    // A rank-one collection's δ is 0 (checked by from_spec).
    if spec.local_mechanism != LocalMechanism::RankOne as i32 && spec.delta < MIN_DELTA {
        return Err(out_of_range("delta".into(), spec.delta, "[1e-100, 1)"));
    }
    if let Some(index) = spec
        .centre
        .iter()
        .position(|v| v.abs() > MAX_CENTRE_MAGNITUDE)
    {
        return Err(out_of_range(
            format!("centre[{index}]"),
            spec.centre[index],
            "[-1e100, 1e100]",
        ));
    }
    for (index, name) in spec.variable_names.iter().enumerate() {
        if let Some(c) = name.chars().find(|c| c.is_control()) {
            return Err(SpecError::NameNotPrintable {
                index,
                code: c as u32,
            });
        }
    }
    Ok(())
}

/// Checks the optional public centre: empty, or exactly `dim` finite values.
pub(super) fn validate_centre(centre: &[f64], dim: usize) -> Result<(), SpecError> {
    if !(centre.is_empty() || centre.len() == dim) {
        return Err(SpecError::CentreLength {
            expected: dim,
            got: centre.len(),
        });
    }
    match centre.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(SpecError::CentreNonFinite {
            index,
            value: centre[index],
        }),
        None => Ok(()),
    }
}

/// Checks the optional variable names: empty, or exactly `dim` distinct non-empty
/// names of at most [`MAX_NAME_BYTES`] bytes.
pub(super) fn validate_names(names: &[String], dim: usize) -> Result<(), SpecError> {
    if !(names.is_empty() || names.len() == dim) {
        return Err(SpecError::NamesLength {
            expected: dim,
            got: names.len(),
        });
    }
    let mut seen = std::collections::HashMap::with_capacity(names.len());
    for (index, name) in names.iter().enumerate() {
        if name.is_empty() {
            return Err(SpecError::NameEmpty { index });
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(SpecError::NameTooLong {
                index,
                bytes: name.len(),
            });
        }
        if let Some(first) = seen.insert(name.as_str(), index) {
            return Err(SpecError::NameDuplicate {
                name: name.clone(),
                first,
                second: index,
            });
        }
    }
    Ok(())
}
