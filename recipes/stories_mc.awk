# stories_mc.awk — a multiple-choice set (hm-eval --mc jsonl) from stories:
# the input is hm-generate --json --samples output (one object per line, its
# "text" a JSON string); each story with at least K + 1 complete sentences
# gives one question: the context is its first half of sentences (at least
# one), the right choice the next sentence, the wrong ones the sentence at
# the same place of the next NCHOICES - 1 usable stories (so every ending is
# a real ending of some story, only not of this one). The label's position
# cycles deterministically (no rand(): the same bytes with any awk).
# Strings stay JSON-escaped as the input has them; sentences end at '.', '!'
# or '?' (optionally followed by a closing quote) before a space or a \n.
#   awk -v NCHOICES=4 -f recipes/stories_mc.awk held.jsonl > mc.jsonl
BEGIN {
    if (NCHOICES == "") NCHOICES = 4
    n = 0
}

# The JSON string literal after "text": (still escaped), or "" if none.
function text_of(line,    i, j, c, out) {
    i = index(line, "\"text\": \"")
    if (i == 0) return ""
    j = i + 9
    out = ""
    while (j <= length(line)) {
        c = substr(line, j, 1)
        if (c == "\\") { out = out substr(line, j, 2); j += 2; continue }
        if (c == "\"") return out
        out = out c
        j++
    }
    return ""
}

# Splits escaped text t into sentences sent[1..]; returns how many end with
# a terminator (a trailing unfinished piece is not counted).
function split_sentences(t,    k, j, c, start, m, nxt) {
    m = 0
    start = 1
    j = 1
    while (j <= length(t)) {
        c = substr(t, j, 1)
        if (c == "\\") { j += 2; continue }
        if (c == "." || c == "!" || c == "?") {
            k = j
            if (substr(t, k + 1, 2) == "\\\"") k += 2
            nxt = substr(t, k + 1, 1)
            if (nxt == " " || substr(t, k + 1, 2) == "\\n") {
                sent[++m] = substr(t, start, k - start + 1)
                start = k + 1
                j = k + 1
                continue
            }
        }
        j++
    }
    return m
}

{
    t = text_of($0)
    m = split_sentences(t)
    if (m < 3) next
    half = int(m / 2)
    ctx = ""
    for (s = 1; s <= half; s++) ctx = ctx sent[s]
    end = sent[half + 1]
    sub(/^( |\\n)+/, "", end)
    if (length(end) < 8) next
    n++
    context[n] = ctx
    ending[n] = " " end
}

END {
    if (n < NCHOICES) {
        print "stories_mc.awk: only " n " usable stories for " NCHOICES " choices" > "/dev/stderr"
        exit 1
    }
    for (i = 1; i <= n; i++) {
        label = (i * 3) % NCHOICES
        line = "{\"context\": \"" context[i] "\", \"choices\": ["
        w = 0
        for (c = 0; c < NCHOICES; c++) {
            if (c == label) e = ending[i]
            else { w++; e = ending[(i + w - 1) % n + 1] }
            line = line (c ? ", " : "") "\"" e "\""
        }
        print line "], \"label\": " label "}"
    }
}
