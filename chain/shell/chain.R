# chain.R: helpers for an R app run by a `chain` runner.  Source it:
#
#   source(file.path(Sys.getenv("CHAIN_SHELL_HELPERS", "/path/to/chain/shell"), "chain.R"))
#
# R dies on SIGTERM (it installs no handler), but Rscript turns SIGINT into
# an `interrupt` condition, so R apps run with stop signal INT
# (`chain submit --stop-signal INT`).  Catch it with chain_guard(), which
# only sets a flag; do state updates and saves inside suspendInterrupts() so
# that an interrupt cannot land half-way through them.
#
# Provides
#   CHAIN_EXIT_DONE = 0, CHAIN_EXIT_TEMPFAIL = 75, CHAIN_EXIT_STOPPED = 99
#   chain_write_atomic(path, lines)   temporary + sync + rename
#   chain_write_counter(n, path)      publish the progress counter
#   chain_read_counter(path)          0 when absent; error unless a plain integer
#   chain_guard(expr)                 evaluate expr; an interrupt sets the stop flag
#   chain_stop_requested()            TRUE once the stop signal arrived
#   chain_stop_status(lead)           list(expected, reasons, exit, warning_present);
#                                     podinfo instants count within lead plus
#                                     CHAIN_WARNING_MARGIN (default 60) seconds
#   chain_stop_expected(lead)         chain_stop_status(lead)$expected
#   chain_now()                       epoch seconds with 3 decimals, as a string
#   chain_log_iteration(event, n, code = NULL)
#                                     append to the iteration log (CHAIN_ITER_LOG, default
#                                     iterations.log): event start, iter, ckpt or exit

CHAIN_EXIT_DONE <- 0L
CHAIN_EXIT_TEMPFAIL <- 75L  # EX_TEMPFAIL: stopped on a termination warning
CHAIN_EXIT_STOPPED <- 99L   # checkpointed and stopped voluntarily

# The one piece of mutable state: the flag the interrupt handler sets.
.chain <- new.env()
.chain$stop <- FALSE

chain_now <- function() sprintf("%.3f", as.numeric(Sys.time()))

.chain_sync <- function(path) {
  # coreutils >= 8.24 fsyncs just the named file or directory.
  if (nzchar(Sys.which("sync"))) {
    suppressWarnings(system2("sync", c("--", shQuote(path)), stdout = FALSE, stderr = FALSE))
  }
  invisible(NULL)
}

chain_write_atomic <- function(path, lines) {
  dir <- dirname(path)
  tmp <- file.path(dir, paste0(".tmp-", basename(path), ".", Sys.getpid()))
  ok <- FALSE
  on.exit(if (!ok) unlink(tmp), add = TRUE)
  writeLines(as.character(lines), tmp)
  .chain_sync(tmp)                 # the data is durable before the rename
  if (!file.rename(tmp, path)) stop("chain_write_atomic: cannot rename ", tmp, " to ", path)
  ok <- TRUE
  .chain_sync(dir)                 # and the rename itself is durable
  invisible(path)
}

chain_write_counter <- function(n, path = Sys.getenv("CKPT_PATH", "state_iter.txt")) {
  n <- as.numeric(n)
  if (length(n) != 1L || is.na(n) || n < 0 || n != floor(n)) stop("chain_write_counter: not a count: ", n)
  chain_write_atomic(path, format(n, scientific = FALSE))
}

chain_read_counter <- function(path = Sys.getenv("CKPT_PATH", "state_iter.txt")) {
  if (!file.exists(path)) return(0)
  text <- trimws(paste(readLines(path, warn = FALSE), collapse = "\n"))
  # A plain integer only: "v2 iter 10" must not become 210.
  if (!grepl("^[0-9]+$", text)) stop("chain_read_counter: ", path, " does not hold a plain integer")
  as.numeric(text)
}

chain_stop_requested <- function() .chain$stop

chain_guard <- function(expr) {
  tryCatch(
    {
      expr
      TRUE
    },
    interrupt = function(e) {
      .chain$stop <- TRUE
      FALSE
    }
  )
}

.chain_to_seconds <- function(raw) {
  if (is.null(raw) || !nzchar(raw)) return(NA_real_)
  raw <- trimws(raw)
  num <- suppressWarnings(as.numeric(raw))
  if (!is.na(num)) return(num)
  raw <- sub("[Zz]$", "+0000", raw)
  raw <- sub("([+-][0-9]{2}):([0-9]{2})$", "\\1\\2", raw)
  for (fmt in c("%Y-%m-%dT%H:%M:%OS%z", "%Y-%m-%d %H:%M:%OS%z", "%Y-%m-%dT%H:%M:%OS", "%Y-%m-%d %H:%M:%OS")) {
    t <- as.POSIXct(raw, format = fmt, tz = "UTC")
    if (!is.na(t)) return(as.numeric(t))
  }
  NA_real_  # anything unparseable is ignored, not raised on
}

.chain_podinfo_instant <- function(name) {
  file <- file.path(Sys.getenv("CHAIN_PODINFO", "/etc/podinfo"), name)
  info <- suppressWarnings(file.info(file))
  if (is.na(info$size) || info$size == 0) return(NA_real_)  # empty file = absent
  raw <- tryCatch(paste(readLines(file, warn = FALSE), collapse = ""), error = function(e) "")
  .chain_to_seconds(raw)
}

chain_stop_status <- function(lead = 0) {
  now <- as.numeric(Sys.time())
  margin <- suppressWarnings(as.numeric(Sys.getenv("CHAIN_WARNING_MARGIN", "60")))
  if (is.na(margin)) margin <- 60
  # Warnings reach the pod late and name only the earliest stop: look further ahead.
  warn_lead <- lead + margin
  reasons <- character(0)
  exit <- NULL
  if (isTRUE(.chain$stop)) {
    reasons <- c(reasons, "signal")
    exit <- CHAIN_EXIT_STOPPED
  }
  deadline <- .chain_to_seconds(Sys.getenv("CHAIN_DEADLINE", ""))
  if (!is.na(deadline) && deadline - now <= lead) {
    reasons <- c(reasons, "deadline")
    exit <- CHAIN_EXIT_STOPPED
  }
  # Re-read on every call: a warning can be withdrawn at any time.
  warning_present <- FALSE
  at <- .chain_podinfo_instant("termination-warning-at")
  if (!is.na(at) && at >= now) {  # an instant in the past is stale
    warning_present <- TRUE
    if (at - now <= warn_lead) {
      reasons <- c(reasons, "termination-warning")
      if (is.null(exit)) exit <- CHAIN_EXIT_TEMPFAIL
    }
  }
  until <- .chain_podinfo_instant("guaranteed-until")
  if (!is.na(until) && until >= now && until - now <= warn_lead) {
    reasons <- c(reasons, "guarantee-ending")  # a reason to save, not to stop
  }
  list(expected = length(reasons) > 0, reasons = reasons, exit = exit, warning_present = warning_present)
}

chain_stop_expected <- function(lead = 0) chain_stop_status(lead)$expected

# One line of the iteration log (CHAIN_ITER_LOG, default iterations.log):
# "<epoch> <event> <iteration> <job|-> <pid> [code]"; event: start, iter, ckpt or exit.
# `chain report` counts the work redone from it.
chain_log_iteration <- function(event, iteration, code = NULL) {
  job <- Sys.getenv("SLURM_JOB_ID", "-")
  if (!nzchar(job)) job <- "-"
  line <- paste(chain_now(), event, format(iteration, scientific = FALSE), job, Sys.getpid(), code)
  cat(trimws(line), "\n", sep = "", file = Sys.getenv("CHAIN_ITER_LOG", "iterations.log"), append = TRUE)
}
