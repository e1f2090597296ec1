//! Paths as the log writes them: percent-encoded URIs, relative to the table root or absolute.
//! A leaf: the log reader, deletion vectors, the damage check and VACUUM all decode here.

/// Percent-decodes a path as written in the log (`a%20b` → `a b`); invalid escapes stay as is.
pub(crate) fn decode_path(raw: &str) -> String {
    if !raw.contains('%') {
        return raw.to_owned();
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_percent_escapes() {
        assert_eq!(decode_path("a%20b%3Dc"), "a b=c");
        assert_eq!(decode_path("plain/part-0.parquet"), "plain/part-0.parquet");
        assert_eq!(decode_path("bad%zz"), "bad%zz");
        assert_eq!(decode_path("end%2"), "end%2");
    }
}
