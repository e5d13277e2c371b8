# montage_steps.rb — running one Montage command as a workflow step: status check, timing,
# progress.
#
# Every Montage tool ends by printing one status line, `[struct stat="OK", ...]`, or
# `stat="ERROR"/"WARNING"` with a message; the exit code alone does not tell WARNING from OK.
# `Steps#run` runs a command (through Pwrake's `bq` when the Rakefile runs under Pwrake, so the
# command executes on the worker; otherwise locally), parses that line, records the step's
# wall-clock span under its phase, and raises Steps::Failed with a one-line message on failure
# (the Rakefile raises it as WorkflowFailed and prints that one line rather than a backtrace).
#
# Timings live in memory (Rake and Pwrake run task actions as threads of one process) and are
# written as CSV at exit to $TIMING_LOG when set — outside the working directory, so the
# measurement adds no I/O to the file system under test.
require 'open3'
require 'shellwords'

module Steps
  class Failed < StandardError; end

  @lock = Mutex.new
  @records = []          # [phase, label, start, finish] in seconds since @t0
  @t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  @total = 0
  @done = 0
  @last_report = -1

  class << self
    attr_accessor :total

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC) - @t0
    end

    # Runs argv (an Array) and returns the parsed status hash; raises Failed unless the tool
    # reported OK (or WARNING, when allow_warning is set).
    def run(phase, label, argv, ctx: nil, allow_warning: false)
      start = now
      out, ok = capture(argv, ctx)
      record(phase, label, start, now)
      status = parse_status(out)
      good = ok && (status['stat'] == 'OK' || (allow_warning && status['stat'] == 'WARNING'))
      return status if good
      why = status['msg'] || out.strip.lines.last || 'no output'
      raise Failed, "#{argv.first} failed for #{label}: #{why.strip}"
    end

    # Times a block of Ruby work (table sorting and the like) as a step.
    def timed(phase, label)
      start = now
      yield
    ensure
      record(phase, label, start, now)
    end

    def capture(argv, ctx)
      if ctx && ctx.respond_to?(:bq, true)           # Pwrake: run on the task's worker
        # No shell words beyond the quoted argv: Ruby's spawn then execs the tool directly, where
        # a redirection such as 2>&1 made Pwrake's worker start a /bin/sh per command (under the
        # syscall hook each costs a hooked process start, ~0.3 s). The status line is on stdout.
        code = nil
        out = ctx.send(:bq, argv.shelljoin) { |_out, status| code = status.exitstatus }
        [out.to_s, code == 0]
      else
        out, st = Open3.capture2e(*argv)
        [out, st.success?]
      end
    rescue Errno::ENOENT
      raise Failed, "#{argv.first}: command not found (is the Debian package montage installed?)"
    end

    # `[struct stat="OK", module="mAdd", time=1.2]` -> {"stat"=>"OK", "module"=>"mAdd", ...}
    def parse_status(out)
      line = out.lines.reverse.find { |l| l.include?('[struct stat=') } or return {}
      fields = line.scan(/(\w+)=("(?:[^"\\]|\\.)*"|[^,\]]*)/).to_h { |k, v| [k, v.strip.delete_prefix('"').delete_suffix('"')] }
      fields.merge('line' => line)
    end

    def record(phase, label, start, finish)
      @lock.synchronize { @records << [phase, label, start, finish] }
    end

    # Called once per finished task; prints "tasks done / total" every 5% (or every task on
    # small runs) when PROGRESS is not 0.
    def task_done
      line = @lock.synchronize do
        @done += 1
        pct = @total.zero? ? 100 : (100 * @done / @total)
        next nil unless @total <= 20 || pct / 5 != @last_report || @done == @total
        @last_report = pct / 5
        format('[workflow] %d/%d tasks done (%d%%), %.1f s', @done, @total, pct, now)
      end
      warn line if line && ENV.fetch('PROGRESS', '1') != '0'
    end

    def write_csv(path)
      File.open(path, 'w') do |f|
        f.puts 'phase,step,start_s,end_s,seconds'
        @records.sort_by { |r| r[2] }.each do |p, l, s, e|
          f.puts format('%s,%s,%.4f,%.4f,%.4f', p, l, s, e, e - s)
        end
      end
    end

    def write_csv_at_exit
      at_exit do
        write_csv(ENV['TIMING_LOG']) if ENV['TIMING_LOG'] && !ENV['TIMING_LOG'].empty?
      end
    end
  end
end
