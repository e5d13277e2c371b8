# image_tables.rb — the few IPAC-table operations the Montage workflow needs.
#
# Montage passes image lists between steps as IPAC ASCII tables: `\` keyword lines, `|`-framed
# header lines, then one fixed-width row per image. mImgtbl lists files in readdir() order, and
# that order differs between file systems (a local directory vs. a CHFS directory). Since the
# order decides the image ids (`cntr`) and the order in which mBgModel and mAdd accumulate
# floating-point sums, an unsorted table would make the mosaic depend on the file system.
# So every image table is put into file-name order with `cntr` renumbered 0..n-1; the workflow's
# result is then a function of the input files only, bit for bit.
module ImageTables
  module_function

  # Splits a table into its header lines and data rows.
  def split(text)
    lines = text.lines
    head = lines.take_while { |l| l.start_with?('\\', '|') }
    [head, lines.drop(head.size).reject { |l| l.strip.empty? }]
  end

  # Column names from the first `|` header line.
  def columns(head)
    first = head.find { |l| l.start_with?('|') } or return []
    first.split('|').map(&:strip).reject(&:empty?)
  end

  # Rewrites an mImgtbl table in place: rows sorted by file name, cntr renumbered.
  def sort_by_fname!(path)
    head, rows = split(File.read(path))
    rows = rows.sort_by { |r| r.split.last }
    rows = rows.each_with_index.map do |r, i|
      r.sub(/\A\s*\d+/) { |m| i.to_s.rjust(m.length) }
    end
    File.write(path, (head + rows).join)
    rows.size
  end

  # Rows of a table as hashes keyed by column name (whitespace-separated values; fine for the
  # tables read here, whose values contain no blanks).
  def rows(path)
    head, rows = split(File.read(path))
    names = columns(head)
    rows.map { |r| names.zip(r.split).to_h }
  end

  # Writes the table mConcatFit reads: which fit status file belongs to which image pair.
  def write_statfiles(path, pairs)
    out = +"| cntr1 | cntr2 | stat                      |\n"
    out << "| int   | int   | char                      |\n"
    pairs.each { |c1, c2, stat| out << format("  %6d  %6d  %-26s\n", c1, c2, stat) }
    File.write(path, out)
  end
end
