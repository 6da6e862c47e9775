"""Modal prompts, one a module: each is a ModalScreen that dismisses with the answer."""
