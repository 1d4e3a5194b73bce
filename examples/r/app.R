# The seed's iteration app in R, run by a chain runner (or by hand).
#
# State is the progress counter in CKPT_PATH.  Every CHECKPOINT_EVERY
# iterations it is written atomically; on the stop signal (INT: Rscript turns
# it into an interrupt condition, whereas SIGTERM would kill R outright) or
# when the runner's deadline is near, the app writes it and exits 99; at
# MAX_ITER it exits 0.  Each event is appended to CHAIN_ITER_LOG.

script_dir <- function() {
  arg <- grep("^--file=", commandArgs(trailingOnly = FALSE), value = TRUE)
  if (length(arg) == 0L) return(getwd())
  dirname(normalizePath(sub("^--file=", "", arg[1L])))
}
helpers <- Sys.getenv("CHAIN_SHELL_HELPERS", file.path(script_dir(), "..", "..", "chain", "shell"))
source(file.path(helpers, "chain.R"))

env_num <- function(name, default) {
  value <- suppressWarnings(as.numeric(Sys.getenv(name, as.character(default))))
  if (is.na(value)) stop(name, " is not a number")
  value
}
max_iter <- env_num("MAX_ITER", 60)
every <- env_num("CHECKPOINT_EVERY", 5)
iter_seconds <- env_num("ITER_SECONDS", 1.0)
ckpt_path <- Sys.getenv("CKPT_PATH", "state_iter.txt")
lead <- iter_seconds + 1  # room for one more iteration and a save

i <- chain_read_counter(ckpt_path)
committed <- i
urgent <- FALSE
chain_log_iteration("start", i)

commit <- function() {
  chain_write_counter(i, ckpt_path)
  committed <<- i
  chain_log_iteration("ckpt", i)
}

finish <- function(code) {
  suspendInterrupts({
    if (i != committed) commit()
    chain_log_iteration("exit", committed, code)
  })
  quit(save = "no", status = code)
}

while (i < max_iter) {
  # Every statement runs guarded: an interrupt anywhere only sets the flag.
  chain_guard({
    status <- chain_stop_status(lead)
    if (!is.null(status$exit)) {
      message("stopping at iteration ", i, ": ", paste(status$reasons, collapse = " "))
      finish(status$exit)
    }
    # Save once per episode (e.g. the guarantee ending), re-armed when it clears.
    if (status$expected && !urgent && i != committed) suspendInterrupts(commit())
    urgent <- status$expected
    Sys.sleep(iter_seconds)  # the "computation" of iteration i + 1
    # Reached only if not interrupted: count the iteration and save atomically.
    suspendInterrupts({
      i <- i + 1
      chain_log_iteration("iter", i)
      if (i %% every == 0) commit()
    })
  })
}
finish(CHAIN_EXIT_DONE)
