//! A message's raw fields: the bytes of each occurrence of one length-delimited
//! field, exactly as written. An on-demand view's message goes to Feast's own
//! SDK in a Python worker this way, with every field Feast wrote, whether or not
//! Oka's vendored `.proto` files know it (prost drops fields it does not know).

/// The bytes of each occurrence of field `number` (length-delimited) of
/// `message`, in order; `None` when the bytes are not a protobuf message.
pub fn repeated_field(message: &[u8], number: u64) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < message.len() {
        let tag = varint(message, &mut at)?;
        let len = match tag & 7 {
            0 => {
                varint(message, &mut at)?;
                0
            }
            1 => 8,
            2 => usize::try_from(varint(message, &mut at)?).ok()?,
            5 => 4,
            _ => return None,
        };
        let end = at.checked_add(len).filter(|&e| e <= message.len())?;
        if tag >> 3 == number && tag & 7 == 2 {
            out.push(&message[at..end]);
        }
        at = end;
    }
    Some(out)
}

fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use prost::Message as _;

    #[test]
    fn the_raw_bytes_of_a_repeated_field_decode_as_prost_decodes_them() {
        use crate::proto::core as pc;
        let view = |name: &str| pc::OnDemandFeatureView {
            spec: Some(pc::OnDemandFeatureViewSpec {
                name: name.to_owned(),
                mode: "python".to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let registry = pc::Registry {
            on_demand_feature_views: vec![view("a"), view("b")],
            version_id: "v".to_owned(),
            ..Default::default()
        };
        let bytes = registry.encode_to_vec();
        let raw = repeated_field(&bytes, 8).unwrap();
        assert_eq!(raw.len(), 2);
        for (r, want) in raw.iter().zip(&registry.on_demand_feature_views) {
            assert_eq!(&pc::OnDemandFeatureView::decode(*r).unwrap(), want);
        }
        assert!(repeated_field(b"\x0a\xff", 1).is_none());
        assert!(repeated_field(b"\x0b", 1).is_none());
    }
}
