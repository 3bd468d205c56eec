from prefeval.cli import main

main()
