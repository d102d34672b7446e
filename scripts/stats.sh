# stats.sh: the summaries of the side-by-side benchmark scripts, sourced by
# them. Their result lines, in the file named by $out, are
# "SETTING MODEL ..." (comment lines start with #).
#
#	vals SETTING MODEL COLUMN   the column's values of those lines, sorted
#	stat SETTING MODEL COLUMN   their median (min-max)
#	med SETTING MODEL COLUMN    their median
vals() { awk -v k="$1" -v m="$2" -v c="$3" '!/^#/ && $1 == k && $2 == m { print $c }' "$out" | sort -g; }
stat() { vals "$1" "$2" "$3" | awk '{ v[NR] = $1 } END { if (NR) printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
med() { vals "$1" "$2" "$3" | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
