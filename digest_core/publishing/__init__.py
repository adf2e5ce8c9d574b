"""Publishing: the editor's side of the daily post — embargo, approval, the schedule, pins,
uploaded issue files, corrections in place and the editor's commands."""
