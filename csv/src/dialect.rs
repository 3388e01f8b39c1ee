//! The delimiter of a file, the cells of one record, and what makes a row a header.

/// The UTF-8 byte order mark some programs (Excel, pandas with `encoding="utf-8-sig"`,
/// PowerShell) write at the start of a text file.
pub const UTF8_BOM: char = '\u{feff}';

/// How the records of one file are split into cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsvDialect {
    /// `,`, `;` or a tab.
    pub delimiter: char,
}

impl CsvDialect {
    /// The dialect of a file whose first non-blank record is `first_record`: `,` if it
    /// holds one outside double quotes, else `;`, else a tab, else `,` (a single
    /// column). A delimiter inside a quoted cell (`"income, annual";age`) does not count.
    pub fn detect(first_record: &str) -> Self {
        let mut quoted = false;
        let mut seen = [false; 3];
        for c in first_record.chars() {
            match c {
                // `""` inside quotes toggles twice: an escaped quote changes nothing.
                '"' => quoted = !quoted,
                ',' if !quoted => seen[0] = true,
                ';' if !quoted => seen[1] = true,
                '\t' if !quoted => seen[2] = true,
                _ => {}
            }
        }
        let delimiter = [',', ';', '\t']
            .into_iter()
            .zip(seen)
            .find_map(|(d, seen)| seen.then_some(d))
            .unwrap_or(',');
        CsvDialect { delimiter }
    }
}

/// Whether the first row's `cells` are a header: some cell is non-empty and not a
/// number.
pub fn is_csv_header(cells: &[String]) -> bool {
    cells
        .iter()
        .any(|c| !c.is_empty() && c.parse::<f64>().is_err())
}

/// `name` without a leading UTF-8 byte order mark, for names that reach a program
/// other than through [`CsvRows`](crate::CsvRows) (a command line built from a file's first line).
pub fn strip_bom(name: &str) -> &str {
    name.strip_prefix(UTF8_BOM).unwrap_or(name)
}

/// One cell as parsed: trimmed, and a pair of double quotes that RFC 4180 kept
/// because a space preceded the opening one (`a, "b c"`) removed.
pub(crate) fn clean_cell(parsed: &str) -> String {
    let c = parsed.trim();
    let c = c
        .strip_prefix('"')
        .and_then(|c| c.strip_suffix('"'))
        .unwrap_or(c);
    c.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialect_and_header_detection() {
        assert_eq!(CsvDialect::detect("a;b,c").delimiter, ',');
        assert_eq!(CsvDialect::detect("a;b").delimiter, ';');
        assert_eq!(CsvDialect::detect("a\tb").delimiter, '\t');
        assert_eq!(CsvDialect::detect("a").delimiter, ',');
        let d = CsvDialect::detect("x");
        assert_eq!(d.split(" a , \" b c \" ,"), vec!["a", "b c", ""]);
        assert!(is_csv_header(&d.split("1,height")));
        assert!(!is_csv_header(&d.split("1,,2e3")));
        assert!(d.split("  ").is_empty());
    }

    #[test]
    fn a_delimiter_inside_quotes_does_not_choose_the_dialect() {
        assert_eq!(CsvDialect::detect("\"income, annual\";age").delimiter, ';');
        assert_eq!(CsvDialect::detect("\"a;b\"\t\"c,d\"").delimiter, '\t');
        assert_eq!(CsvDialect::detect("\"\"\"a,b\"\"\";c").delimiter, ';');
        let d = CsvDialect::detect("\"income, annual\",age");
        assert_eq!(d.delimiter, ',');
        assert_eq!(d.split("\"income, annual\",age"), ["income, annual", "age"]);
        assert_eq!(d.split("\"say \"\"hi\"\"\",2"), ["say \"hi\"", "2"]);
    }

    #[test]
    fn a_bom_is_stripped_from_a_name() {
        assert_eq!(strip_bom("\u{feff}height"), "height");
        assert_eq!(strip_bom("height"), "height");
    }
}
