def analyze(df):
    print("steps", len(df), "mean push", round(float(df["action.push"].mean()), 3))
