# fortunes2jsonl.awk — the Debian `fortunes` files (entries separated by a
# line holding only "%") → one JSON line {"text": ...} per entry, so that
# hm-tokenize splits held-out data by whole fortunes.
# usage: LC_ALL=C awk -f fortunes2jsonl.awk /usr/share/games/fortunes/FILE ... > out.jsonl
# (plain string building, no gsub replacement escapes: portable to mawk)
function esc(s,    out, i, n, c) {
    out = ""
    n = length(s)
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (c == "\\") out = out "\\\\"
        else if (c == "\"") out = out "\\\""
        else if (c == "\t") out = out "\\t"
        else if (c == "\n") out = out "\\n"
        else if (c < " " || c == "\177") continue
        else out = out c
    }
    return out
}
function flush() {
    if (buf != "")
        printf "{\"text\": \"%s\"}\n", esc(buf)
    buf = ""
}
FNR == 1 { flush() }
/^%$/ { flush(); next }
{ buf = (buf == "" ? $0 : buf "\n" $0) }
END { flush() }
