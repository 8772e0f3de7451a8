"""Offline work on saved transcripts: replaying a transcript call by call (`replay`) and describing its
shape (`inspect`)."""
