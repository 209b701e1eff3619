//! A small, forgiving shell parser: splits a command
//! line into simple commands (on `;`, `&&`, `||`, `|`, `&`, newlines and
//! parentheses), removes quotes, records redirections, skips here-document
//! bodies and parses command substitutions (`$(...)`, backticks, `<(...)`)
//! as commands of their own. It never fails: text it cannot make sense of
//! (an unterminated quote) is taken as far as it goes and flagged.
//!
//! Its own crate because two layers read commands: the permission check
//! (whittle-tools) and the context's state ledger (whittle-context), which
//! lists the files a command touched; neither may depend on the other.
//!
//! ```
//! let parsed = whittle_shell::parse("cd src && FOO=1 cargo test 2>&1 | tee log.txt");
//! let words: Vec<&[String]> = parsed.commands.iter().map(|c| c.words.as_slice()).collect();
//! assert_eq!(words, [&["cd", "src"][..], &["FOO=1", "cargo", "test"], &["tee", "log.txt"]]);
//! assert!(parsed.commands[2].piped_in);
//! assert!(whittle_shell::is_assignment("FOO=1"));
//! ```

/// True for `NAME=value`: a variable assignment before a program (`NAME` a
/// shell name: a letter or `_`, then letters, digits or `_`). One rule for
/// the permission check and the ledger, so they agree on what runs.
pub fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// Deepest nesting of substitutions and `bash -c` scripts that is parsed.
pub const MAX_DEPTH: usize = 8;

/// A redirection such as `> out.txt` or `2>&1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// The operator without its file descriptor number (`>`, `>>`, `<`, `&>`, ...).
    pub op: String,
    /// The file (or descriptor, for `>&`) it points at, quotes removed.
    pub target: String,
}

impl Redirect {
    /// True when the redirection writes to a file (not a descriptor duplicate).
    pub fn writes_file(&self) -> bool {
        match self.op.as_str() {
            ">" | ">>" | ">|" | "&>" | "&>>" | "<>" => true,
            ">&" => !is_fd_target(&self.target),
            _ => false,
        }
    }

    /// True when the redirection reads a file.
    pub fn reads_file(&self) -> bool {
        match self.op.as_str() {
            "<" | "<>" => true,
            "<&" => !is_fd_target(&self.target),
            _ => false,
        }
    }
}

fn is_fd_target(t: &str) -> bool {
    t == "-" || (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
}

/// One simple command: its words with quotes removed, and its redirections.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The words, quotes removed; `$VAR` and `$(...)` are left as written.
    pub words: Vec<String>,
    /// Its redirections.
    pub redirects: Vec<Redirect>,
    /// True when a `|` feeds it the previous command's output.
    pub piped_in: bool,
}

/// The result of parsing a command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Every simple command, substitutions included.
    pub commands: Vec<SimpleCommand>,
    /// Why the text could not be fully parsed, if it could not.
    pub problem: Option<String>,
    /// Each parsed script with quoted text blanked out (as `Q`), for
    /// patterns that only count when written as code (fork bombs).
    pub unquoted: Vec<String>,
}

#[derive(Debug)]
enum Token {
    Word(String),
    /// A separator; the flag says whether it is a pipe.
    Sep {
        pipe: bool,
    },
    Redir(String),
}

/// Parses `src`, with substitutions appended as further commands.
pub fn parse(src: &str) -> Parsed {
    let mut out = Parsed::default();
    parse_into(src, 0, &mut out);
    out
}

/// Parses `src` at nesting `depth` (a `bash -c` script inside a command)
/// into `out`, so the caller can keep one list for a whole command line.
pub fn parse_into(src: &str, depth: usize, out: &mut Parsed) {
    if depth > MAX_DEPTH {
        out.problem
            .get_or_insert_with(|| "commands are nested too deeply".to_owned());
        return;
    }
    let chars: Vec<char> = src.chars().collect();
    let mut lexer = Lexer::new(&chars);
    lexer.run();
    if let Some(p) = lexer.problem.take() {
        out.problem.get_or_insert(p);
    }
    out.unquoted.push(std::mem::take(&mut lexer.unquoted));
    let mut current = SimpleCommand::default();
    let mut pending_redirect: Option<String> = None;
    for token in lexer.tokens {
        match token {
            Token::Word(w) => match pending_redirect.take() {
                Some(op) => current.redirects.push(Redirect { op, target: w }),
                None => current.words.push(w),
            },
            Token::Redir(op) => {
                if let Some(op) = pending_redirect.replace(op) {
                    current.redirects.push(Redirect {
                        op,
                        target: String::new(),
                    });
                }
            }
            Token::Sep { pipe } => {
                if let Some(op) = pending_redirect.take() {
                    current.redirects.push(Redirect {
                        op,
                        target: String::new(),
                    });
                }
                let finished = std::mem::take(&mut current);
                current.piped_in = pipe;
                if !finished.words.is_empty() || !finished.redirects.is_empty() {
                    out.commands.push(finished);
                }
            }
        }
    }
    if let Some(op) = pending_redirect.take() {
        current.redirects.push(Redirect {
            op,
            target: String::new(),
        });
    }
    if !current.words.is_empty() || !current.redirects.is_empty() {
        out.commands.push(current);
    }
    for sub in lexer.substitutions {
        parse_into(&sub, depth + 1, out);
    }
}

struct Lexer<'a> {
    chars: &'a [char],
    pos: usize,
    tokens: Vec<Token>,
    substitutions: Vec<String>,
    word: String,
    /// True once the current word has any content (even an empty quote).
    in_word: bool,
    /// Here-document delimiters waiting for the end of the line (with `<<-`).
    heredocs: Vec<(String, bool)>,
    /// The next word is a here-document delimiter (`<<-` when true).
    expect_heredoc: Option<bool>,
    problem: Option<String>,
    /// The source with quoted text replaced by `Q`.
    unquoted: String,
    /// How many `$(` this lexer is inside of.
    nesting: usize,
    /// Stop at the `)` that closes the substitution being lexed.
    stop_at_paren: bool,
    /// Open `(` seen while `stop_at_paren`.
    parens: usize,
    /// The closing `)` was found.
    done: bool,
}

impl<'a> Lexer<'a> {
    fn new(chars: &'a [char]) -> Self {
        Self::from_chars(chars, 0)
    }

    /// A lexer for the text after `$(`, which stops at its closing `)`.
    /// It borrows the rest of the source: copying it made many `$(` quadratic.
    fn nested(chars: &'a [char], nesting: usize) -> Self {
        let mut lexer = Self::from_chars(chars, nesting);
        lexer.stop_at_paren = true;
        lexer
    }

    fn from_chars(chars: &'a [char], nesting: usize) -> Self {
        Self {
            chars,
            nesting,
            stop_at_paren: false,
            parens: 0,
            done: false,
            pos: 0,
            tokens: Vec::new(),
            substitutions: Vec::new(),
            word: String::new(),
            in_word: false,
            heredocs: Vec::new(),
            expect_heredoc: None,
            problem: None,
            unquoted: String::new(),
        }
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn flag(&mut self, problem: &str) {
        self.problem.get_or_insert_with(|| problem.to_owned());
    }

    fn end_word(&mut self) {
        if self.in_word {
            let w = std::mem::take(&mut self.word);
            self.in_word = false;
            match self.expect_heredoc.take() {
                Some(dash) => self.heredocs.push((w, dash)),
                None => self.tokens.push(Token::Word(w)),
            }
        }
    }

    fn sep(&mut self, pipe: bool) {
        self.end_word();
        self.tokens.push(Token::Sep { pipe });
    }

    fn run(&mut self) {
        while !self.done
            && let Some(c) = self.peek(0)
        {
            let start = self.pos;
            self.step(c);
            if matches!(c, '\'' | '"') {
                self.unquoted.push('Q');
            } else {
                let end = self.pos.min(self.chars.len());
                self.unquoted.extend(&self.chars[start.min(end)..end]);
            }
        }
        self.end_word();
        if !self.heredocs.is_empty() {
            // A here-document that never started: the text ended on its line.
            self.heredocs.clear();
        }
    }

    /// Consumes the construct that starts with `c`.
    fn step(&mut self, c: char) {
        {
            match c {
                ' ' | '\t' | '\r' => {
                    self.end_word();
                    self.pos += 1;
                }
                '\n' => {
                    self.sep(false);
                    self.pos += 1;
                    self.skip_heredoc_bodies();
                }
                '#' if !self.in_word => self.skip_comment(),
                '\'' => {
                    self.pos += 1;
                    self.in_word = true;
                    self.single_quoted();
                }
                '"' => {
                    self.pos += 1;
                    self.in_word = true;
                    self.double_quoted();
                }
                '\\' => {
                    self.pos += 1;
                    match self.peek(0) {
                        Some('\n') => self.pos += 1,
                        Some(c) => {
                            self.word.push(c);
                            self.in_word = true;
                            self.pos += 1;
                        }
                        None => {}
                    }
                }
                '$' => self.dollar(),
                '`' => {
                    self.pos += 1;
                    self.in_word = true;
                    self.backtick();
                }
                ';' => {
                    self.pos += if self.peek(1) == Some(';') { 2 } else { 1 };
                    self.sep(false);
                }
                '(' => {
                    self.parens += 1;
                    self.pos += 1;
                    self.sep(false);
                }
                ')' => {
                    self.pos += 1;
                    if self.stop_at_paren && self.parens == 0 {
                        self.end_word();
                        self.done = true;
                    } else {
                        self.parens = self.parens.saturating_sub(1);
                        self.sep(false);
                    }
                }
                '|' => match self.peek(1) {
                    Some('|') => {
                        self.pos += 2;
                        self.sep(false);
                    }
                    Some('&') => {
                        self.pos += 2;
                        self.sep(true);
                    }
                    _ => {
                        self.pos += 1;
                        self.sep(true);
                    }
                },
                '&' => match self.peek(1) {
                    Some('&') => {
                        self.pos += 2;
                        self.sep(false);
                    }
                    Some('>') => {
                        self.end_word();
                        let op = if self.peek(2) == Some('>') {
                            "&>>"
                        } else {
                            "&>"
                        };
                        self.pos += op.len();
                        self.tokens.push(Token::Redir(op.to_owned()));
                    }
                    _ => {
                        self.pos += 1;
                        self.sep(false);
                    }
                },
                '<' | '>' => self.redirect(c),
                _ => {
                    self.word.push(c);
                    self.in_word = true;
                    self.pos += 1;
                }
            }
        }
    }

    fn skip_comment(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                break;
            }
            self.pos += 1;
        }
    }

    fn single_quoted(&mut self) {
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            if c == '\'' {
                return;
            }
            self.word.push(c);
        }
        self.flag("unterminated single quote");
    }

    fn double_quoted(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.pos += 1;
                    return;
                }
                '\\' => {
                    self.pos += 1;
                    match self.peek(0) {
                        Some(n @ ('"' | '\\' | '$' | '`')) => {
                            self.word.push(n);
                            self.pos += 1;
                        }
                        Some('\n') => self.pos += 1,
                        _ => self.word.push('\\'),
                    }
                }
                '$' => self.dollar(),
                '`' => {
                    self.pos += 1;
                    self.backtick();
                }
                _ => {
                    self.word.push(c);
                    self.pos += 1;
                }
            }
        }
        self.flag("unterminated double quote");
    }

    /// `$(...)` is a substitution, `$((...))` arithmetic, `${...}` a
    /// parameter; all stay in the word as written.
    fn dollar(&mut self) {
        self.in_word = true;
        match (self.peek(1), self.peek(2)) {
            (Some('('), Some('(')) => {
                let start = self.pos;
                self.pos += 3;
                let _ = self.balanced('(', ')', 2);
                self.word.extend(&self.chars[start..self.pos]);
            }
            (Some('('), _) => {
                let start = self.pos;
                self.pos += 2;
                let inner = self.substitution();
                self.substitutions.push(inner);
                self.word.extend(&self.chars[start..self.pos]);
            }
            (Some('{'), _) => {
                let start = self.pos;
                self.pos += 2;
                let _ = self.balanced('{', '}', 1);
                self.word.extend(&self.chars[start..self.pos]);
            }
            _ => {
                self.word.push('$');
                self.pos += 1;
            }
        }
    }

    /// Reads a command substitution's text (after `$(` or `<(`) up to its
    /// closing `)`, understanding quotes and here-documents inside it.
    fn substitution(&mut self) -> String {
        if self.nesting >= MAX_DEPTH {
            return self.balanced('(', ')', 1);
        }
        let chars = self.chars;
        let mut inner = Lexer::nested(&chars[self.pos..], self.nesting + 1);
        inner.run();
        let start = self.pos;
        self.pos = (self.pos + inner.pos).min(self.chars.len());
        if !inner.done {
            self.flag("unterminated substitution");
            return self.chars[start..self.pos].iter().collect();
        }
        if let Some(p) = inner.problem {
            self.flag(&p);
        }
        // Everything before the closing `)`.
        self.chars[start..self.pos - 1].iter().collect()
    }

    /// Reads up to the `close` that brings `depth` to zero, skipping quoted
    /// text; returns what was inside (without the final closer).
    fn balanced(&mut self, open: char, close: char, mut depth: usize) -> String {
        let start = self.pos;
        while let Some(c) = self.peek(0) {
            match c {
                '\\' => self.pos += 1,
                '\'' => {
                    self.pos += 1;
                    while let Some(q) = self.peek(0) {
                        if q == '\'' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                '"' => {
                    self.pos += 1;
                    while let Some(q) = self.peek(0) {
                        if q == '\\' {
                            self.pos += 1;
                        } else if q == '"' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ if c == open => depth += 1,
                _ if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        let inner: String = self.chars[start..self.pos].iter().collect();
                        self.pos += 1;
                        return inner;
                    }
                }
                _ => {}
            }
            self.pos += 1;
        }
        self.pos = self.pos.min(self.chars.len());
        self.flag("unterminated substitution");
        self.chars[start.min(self.chars.len())..].iter().collect()
    }

    fn backtick(&mut self) {
        let start = self.pos;
        while let Some(c) = self.peek(0) {
            if c == '\\' {
                self.pos += 2;
                continue;
            }
            if c == '`' {
                let inner: String = self.chars[start..self.pos].iter().collect();
                self.pos += 1;
                self.substitutions.push(inner.replace("\\`", "`"));
                self.word.push_str("`...`");
                return;
            }
            self.pos += 1;
        }
        self.pos = self.pos.min(self.chars.len());
        let inner: String = self.chars[start.min(self.chars.len())..].iter().collect();
        self.substitutions.push(inner);
        self.flag("unterminated backquote");
    }

    fn redirect(&mut self, c: char) {
        // `<(...)` and `>(...)` are process substitutions, not redirections.
        if self.peek(1) == Some('(') && !self.in_word {
            let start = self.pos;
            self.pos += 2;
            let inner = self.substitution();
            self.substitutions.push(inner);
            self.word.extend(&self.chars[start..self.pos]);
            self.in_word = true;
            return;
        }
        // A word of digits right before the operator is its descriptor.
        if self.in_word && !self.word.is_empty() && self.word.bytes().all(|b| b.is_ascii_digit()) {
            self.word.clear();
            self.in_word = false;
        } else {
            self.end_word();
        }
        let rest: String = self.chars[self.pos..].iter().take(3).collect();
        let op = if c == '<' {
            ["<<<", "<<-", "<<", "<&", "<>", "<"]
                .into_iter()
                .find(|op| rest.starts_with(op))
                .unwrap_or("<")
        } else {
            [">>", ">&", ">|", ">"]
                .into_iter()
                .find(|op| rest.starts_with(op))
                .unwrap_or(">")
        };
        self.pos += op.len();
        match op {
            "<<" | "<<-" => self.expect_heredoc = Some(op == "<<-"),
            _ => self.tokens.push(Token::Redir(op.to_owned())),
        }
    }

    fn skip_heredoc_bodies(&mut self) {
        let docs = std::mem::take(&mut self.heredocs);
        for (delimiter, strip_tabs) in docs {
            loop {
                let start = self.pos;
                if start >= self.chars.len() {
                    self.flag("unterminated here-document");
                    return;
                }
                while let Some(c) = self.peek(0) {
                    self.pos += 1;
                    if c == '\n' {
                        break;
                    }
                }
                let line: String = self.chars[start..self.pos].iter().collect();
                let line = line.trim_end_matches(['\n', '\r']);
                let line = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if line == delimiter {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_name_shell_variables() {
        for yes in ["A=1", "_x=", "PATH=/bin:$PATH", "a1_B=x=y"] {
            assert!(is_assignment(yes), "{yes}");
        }
        for no in ["1A=x", "=x", "a-b=1", "ls", "--opt=1", "./x=1"] {
            assert!(!is_assignment(no), "{no}");
        }
    }

    fn words(src: &str) -> Vec<Vec<String>> {
        parse(src).commands.into_iter().map(|c| c.words).collect()
    }

    #[test]
    fn splits_on_operators_and_removes_quotes() {
        assert_eq!(
            words("a 'b c' \"d $e\" && f|g; h || i & j"),
            vec![
                vec!["a", "b c", "d $e"],
                vec!["f"],
                vec!["g"],
                vec!["h"],
                vec!["i"],
                vec!["j"]
            ]
        );
        let p = parse("ls | grep x");
        assert!(!p.commands[0].piped_in);
        assert!(p.commands[1].piped_in);
    }

    #[test]
    fn substitutions_become_commands() {
        assert_eq!(
            words("echo $(sudo ls) `whoami` <(cat x)"),
            vec![
                vec!["echo", "$(sudo ls)", "`...`", "<(cat x)"],
                vec!["sudo", "ls"],
                vec!["whoami"],
                vec!["cat", "x"]
            ]
        );
        assert_eq!(words("echo \"$(rm -rf x)\"")[1], vec!["rm", "-rf", "x"]);
        // A here-document inside a substitution, with a quote and a `)` in it.
        let p = parse("git commit -m \"$(cat <<'EOF'\nDon't (ever)\nEOF\n)\" && sudo x");
        assert!(p.problem.is_none(), "{:?}", p.problem);
        let w: Vec<Vec<String>> = p.commands.into_iter().map(|c| c.words).collect();
        assert_eq!(w[1], vec!["sudo", "x"]);
        assert_eq!(w[2], vec!["cat"]);
        assert_eq!(
            words("echo $(echo $(echo (a)) b) c")[0],
            vec!["echo", "$(echo $(echo (a)) b)", "c"]
        );
    }

    #[test]
    fn redirections_are_recorded() {
        let p = parse("cmd 2>&1 >out.txt < in 2> /dev/null &>> log");
        let c = &p.commands[0];
        assert_eq!(c.words, vec!["cmd"]);
        let r: Vec<(&str, &str)> = c
            .redirects
            .iter()
            .map(|r| (r.op.as_str(), r.target.as_str()))
            .collect();
        assert_eq!(
            r,
            vec![
                (">&", "1"),
                (">", "out.txt"),
                ("<", "in"),
                (">", "/dev/null"),
                ("&>>", "log")
            ]
        );
        assert!(!c.redirects[0].writes_file());
        assert!(c.redirects[1].writes_file());
    }

    #[test]
    fn heredoc_bodies_are_data() {
        let w = words("cat <<'EOF' > f\nsudo rm -rf /\nEOF\necho done");
        assert_eq!(w, vec![vec!["cat"], vec!["echo", "done"]]);
    }

    #[test]
    fn broken_input_is_flagged_not_fatal() {
        for src in ["echo 'oops", "echo \"x", "$(", "`", "a <<EOF", "))((", "\\"] {
            let _ = parse(src);
        }
        assert!(parse("echo 'oops").problem.is_some());
        // Hostile nesting neither overflows the stack nor is accepted silently.
        for hostile in [
            "$(".repeat(50_000),
            "`$(".repeat(10_000),
            "<(".repeat(50_000),
        ] {
            assert!(parse(&hostile).problem.is_some());
        }
        assert!(parse("echo ok").problem.is_none());
    }
}
