# doc_blocks.sh: sourced by tutorial.sh and doc_programs.sh, which run what
# the docs show.
#
# doc_blocks KIND DOC prints "arg<TAB>line" for every line of the fenced
# block that follows each "<!-- KIND: arg -->" (or "<!-- KIND -->", arg
# empty) line of DOC.
doc_blocks() {
  awk -v kind="$1" '
    $0 ~ "^<!-- " kind "(:|  *-->)" { arg = $0; sub("^<!-- " kind ":? *", "", arg); sub(" *-->$", "", arg); want = 1; next }
    want && /^```/ && !inside { inside = 1; next }
    inside && /^```/ { inside = 0; want = 0; next }
    inside { print arg "\t" $0 }' "$2"
}

# doc_block KIND DOC ARG prints the lines of the blocks whose arg is ARG.
doc_block() {
  doc_blocks "$1" "$2" | awk -F'\t' -v a="$3" '$1 == a { sub(/^[^\t]*\t/, ""); print }'
}
