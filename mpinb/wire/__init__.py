"""What crosses between the engines and the notebook: the record of a cell on a rank, value
summaries, the status and exit-record messages, how cells are named. Pure, both sides import it."""
