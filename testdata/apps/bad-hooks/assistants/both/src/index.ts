function Create(ctx, messages) { return { messages }; }
