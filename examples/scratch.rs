use brush_parser::*;
fn main() {
    let opts = ParserOptions::default();
    let cmds = ["git status && cargo build 2>&1 | tail -n 20; ls -la src || echo fail", "bash -c 'rm -rf /tmp/x' && echo $(cat /etc/passwd) > out.txt", "cat <<EOF > x.sh\nrm -rf /\nEOF\nsh x.sh", ":(){ :|:& };:", "for f in *.rs; do wc -l \"$f\"; done", "echo `whoami`", "a='unterminated"];
    for c in cmds {
        let toks = uncached_tokenize_str(c, &opts.tokenizer_options());
        match toks { Ok(t) => { let p = parse_tokens(&t, &opts); println!("{c}\n => {:#?}", p.map(|p| format!("{p:?}").chars().take(1500).collect::<String>())); } Err(e) => println!("tok err {e}") }
    }
    let c = cmds[0];
    let start = std::time::Instant::now();
    let n = 20000;
    for _ in 0..n {
        let t = uncached_tokenize_str(c, &opts.tokenizer_options()).unwrap();
        let p = parse_tokens(&t, &opts).unwrap();
        std::hint::black_box(p);
    }
    println!("{:?} per parse", start.elapsed() / n);
    let w = word::parse("\"$(rm -rf x)\"abc", &opts); println!("{w:?}");
}
