"""What a check is, shared by the notebook, the grading kernel and the grading worker; a chapter's check module
imports it through ``autograder.core``."""
