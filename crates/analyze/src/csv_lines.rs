//! The header and the line loop every comma-separated log reader of this crate shares (bundle logs, route logs,
//! the network analysis): one place that reads the header, finds columns by name with an error naming the file,
//! and hands out the data lines.

use std::io::BufRead;

use crate::Error;

/// A CSV log after its header line.
pub(crate) struct CsvLines<R> {
    name: String,
    input: R,
    header: Vec<String>,
    line: String,
}

impl<R: BufRead> CsvLines<R> {
    /// Reads the header line of `input`; `name` labels the file in errors. An empty input is an error.
    pub(crate) fn open(name: &str, mut input: R) -> Result<Self, Error> {
        let mut line = String::with_capacity(256);
        let n = input
            .read_line(&mut line)
            .map_err(|e| Error::Io(format!("{name}: {e}")))?;
        if n == 0 {
            return Err(Error::Format(format!(
                "{name}: empty file (no header line)"
            )));
        }
        let header = line
            .trim_end()
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        Ok(CsvLines {
            name: name.to_string(),
            input,
            header,
            line,
        })
    }

    /// The column called `col`, if the header has it.
    pub(crate) fn find(&self, col: &str) -> Option<usize> {
        self.header.iter().position(|c| c == col)
    }

    /// The columns called `want`, in that order; the first one missing is an error naming the file and the header.
    pub(crate) fn require(&self, want: &[&str]) -> Result<Vec<usize>, Error> {
        want.iter()
            .map(|w| {
                self.find(w).ok_or_else(|| {
                    Error::Format(format!(
                        "{} line 1: no `{w}` column (header: {})",
                        self.name,
                        self.header.join(",")
                    ))
                })
            })
            .collect()
    }

    /// An error about the header, naming the file's first line.
    pub(crate) fn header_error(&self, what: &str) -> Error {
        Error::Format(format!("{} line 1: {what}", self.name))
    }

    /// The next line without its line end, `None` at the end of the input.
    pub(crate) fn next_line(&mut self) -> Result<Option<&str>, Error> {
        self.line.clear();
        let n = self
            .input
            .read_line(&mut self.line)
            .map_err(|e| Error::Io(format!("{}: {e}", self.name)))?;
        Ok((n > 0).then(|| self.line.trim_end()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_found_by_name_and_a_missing_one_names_file_and_header() {
        let mut l = CsvLines::open("n.csv", "a, b,c\n1,2,3\r\n\n4,5,6".as_bytes()).expect("header");
        assert_eq!(l.find("b"), Some(1));
        assert_eq!(l.require(&["c", "a"]).expect("present"), vec![2, 0]);
        let e = l
            .require(&["a", "x"])
            .expect_err("x is missing")
            .to_string();
        assert_eq!(e, "n.csv line 1: no `x` column (header: a,b,c)");
        assert_eq!(l.next_line().expect("read"), Some("1,2,3"));
        assert_eq!(l.next_line().expect("read"), Some(""));
        assert_eq!(l.next_line().expect("read"), Some("4,5,6"));
        assert_eq!(l.next_line().expect("read"), None);
        let e = CsvLines::open("e.csv", "".as_bytes())
            .err()
            .expect("empty")
            .to_string();
        assert_eq!(e, "e.csv: empty file (no header line)");
    }
}
